"""Every command an on-call is given (README's "Alerts and runbooks", the alerts' annotations,
and what `doctor` prints there) runs as written in the shipped image, on a fake node mounted at
/host as the DaemonSet mounts it.

The commands are read out of README and the rendered PrometheusRule each time, so a runbook edited
later is the one tested. No cluster is at hand, so each command's cluster part is replaced by
what it stands for:
- `kubectl -n NS exec $POD -- ARGV`: ARGV is run with `podman exec` in the watcher's container
  (the image's default command, as the DaemonSet runs it), by the image's PATH, as runc runs an
  exec in a pod;
- `kubectl debug node/$NODE -it --image=IMAGE -- ARGV`: ARGV in IMAGE with the node's / at /host,
  the host's network and PIDs, as `kubectl debug node` runs it. `busybox` is an image made here of
  Debian's static busybox (the same program, not Docker Hub's build, which cannot be fetched);
- `amtool silence add ...`: against a real Alertmanager (Debian's), holding the alert as the rule
  raises it, which the silence must then silence;
- every other `kubectl` command (and the `$(kubectl ...)` that finds the pod) is run against an
  API server address where nothing listens: kubectl parses the whole command line before it
  connects, so a flag or a command it does not know fails differently from the refused
  connection this test expects.

Marked `image` (it builds the image with buildah, as tests/installer/test_image.py does).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tarfile
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.monitoring.prometheus import free_port
from tests.support.guard import HOST_ARCH
from tests.support.image import IMAGE_TESTS, LIMITS, pod_options, podman
from tests.support.kustomize import kubectl, render_all
from tests.support.noderoot import VERSION_ANSWER, shell_plugin, with_shell
from tests.support.nodestate import log_lines, marker
from tests.support.waiting import wait_for

from .conftest import MULTUS_CONF

REPO = Path(__file__).resolve().parents[2]
IMAGE = f"localhost/cni-delguard:runbooks-test-{HOST_ARCH}"
BUSYBOX = "localhost/dgal-busybox:runbooks-test"
# The images the runbooks name for `kubectl debug node`, and what stands for each here.
DEBUG_IMAGES = {"busybox": BUSYBOX}
NODE = "dgal-node-1"
NAMESPACE = "kube-system"
NET = "multus-cni-network"
EXEC = re.compile(r"^kubectl -n (\S+) exec (\S+) -- (.+)$")
DEBUG = re.compile(r"^kubectl debug node/(\S+) -it --image=(\S+) -- (.+)$")
FINDER = re.compile(r"\$\((kubectl [^)]*)\)")
# What each tool may answer on the fake node (its documented exit codes; 2 is a usage error and
# never allowed).
OK_CODES = {"doctor": {0, 1}, "ready": {0, 10, 11, 12, 13}}

pytestmark = IMAGE_TESTS


def runbook_section() -> str:
    monitoring = (REPO / "docs" / "monitoring.md").read_text()
    alerts = monitoring[monitoring.index("## Alerts and runbooks"):]
    return alerts + (REPO / "docs" / "runbooks.md").read_text()


def commands_in(markdown: str) -> list[str]:
    """The command lines of its ```sh blocks and its inline code that starts with a tool."""
    found: list[str] = []
    blocks = re.findall(r"```sh\n(.*?)```", markdown, re.S)
    for block in blocks:
        found += [line.strip() for line in block.splitlines() if line.strip()]
    prose = re.sub(r"```.*?```", "", markdown, flags=re.S)
    for raw in re.findall(r"`([^`]+)`", prose.replace("\n", " ")):
        span = " ".join(raw.split())
        if span.startswith(("kubectl ", "amtool ")):
            found.append(span)
    return found


def annotation_commands() -> list[str]:
    (rule,) = [d for d in render_all("monitoring") if d["kind"] == "PrometheusRule"]
    found = []
    for r in rule["spec"]["groups"][0]["rules"]:
        for template in r["annotations"].values():
            text = template.replace("{{ $labels.namespace }}", NAMESPACE)
            found += commands_in(text.replace("{{ $labels.node }}", "$NODE"))
    return found


try:
    ALL = commands_in(runbook_section()) + annotation_commands()
except pytest.skip.Exception as no_kubectl:  # the alerts' annotations are rendered by kustomize
    pytest.skip(str(no_kubectl), allow_module_level=True)


def kind(command: str) -> str:
    if re.fullmatch(r"[A-Z]+=\S.*", command):
        return "assignment"
    if EXEC.match(FINDER.sub("$POD", command)):
        return "exec-prefix" if command.endswith(" --") else "exec"
    if command.endswith(" --") and EXEC.match(command + " x"):
        return "exec-prefix"
    if DEBUG.match(command):
        return "debug"
    if command.startswith("amtool "):
        return "amtool"
    if command.startswith("kubectl "):
        return "kubectl"
    return "unknown"


def by_kind(name: str) -> list[str]:
    return [c for c in ALL if kind(c) == name]


def test_every_command_is_one_this_test_runs():
    assert len(ALL) > 20
    assert [c for c in ALL if kind(c) == "unknown"] == []
    for name in ("assignment", "exec", "exec-prefix", "debug", "amtool", "kubectl"):
        assert by_kind(name), name
    # Commands on the node go through the pod's PATH with the node's root, never a bare path.
    for command in by_kind("exec"):
        argv = shlex.split(EXEC.match(FINDER.sub("$POD", command))[3])
        assert argv[0] == "cni-delguard" and "--root" in argv and "/host" in argv, command


# ---- the image, a node, its watcher --------------------------------------------------------


@pytest.fixture(scope="module")
def image():
    env = dict(os.environ, IMAGE=IMAGE.removesuffix(f"-{HOST_ARCH}"))
    r = subprocess.run(["bash", str(REPO / "tools/build-image.sh"), HOST_ARCH], env=env,
                       capture_output=True, text=True, timeout=1800, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    yield IMAGE
    podman("manifest", "rm", env["IMAGE"])
    podman("rmi", "--force", IMAGE)


@pytest.fixture(scope="module")
def busybox(tmp_path_factory):
    """An image of Debian's static busybox and its applets, like Docker Hub's `busybox`."""
    root = tmp_path_factory.mktemp("busybox")
    (root / "bin").mkdir()
    shutil.copy2("/bin/busybox", root / "bin/busybox")
    applets = subprocess.run(["/bin/busybox", "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    for applet in applets:
        if applet != "busybox":
            (root / "bin" / applet).symlink_to("busybox")
    archive = root.parent / "busybox.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(root / "bin", arcname="bin")
    r = podman("import", "--quiet", "--change", "ENV PATH=/bin", str(archive), BUSYBOX)
    assert r.returncode == 0, r.stderr
    yield BUSYBOX
    podman("rmi", "--force", BUSYBOX)


class Node:
    """A node root as the runbooks find one: multus's conf, multus in the bin dir, a strict DEL
    that has kept failing for an hour (so doctor prints a release command), a decision log."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin, self.net = root / "opt/cni/bin", root / "etc/cni/net.d"
        self.state = root / "var/lib/cni/delguard"
        self.log = root / "var/log/cni-delguard/delguard.log"
        for d in (self.bin, self.net):
            d.mkdir(parents=True)
        self.state.mkdir(parents=True, mode=0o700)
        (self.net / "00-multus.conf").write_text(MULTUS_CONF)
        shell_plugin(self.bin / "multus", VERSION_ANSWER)
        old = time.time() - 3600
        marker(self.state, NET, "stuck1", "completed", old)
        failing = {"command": "DEL", "decision": "forward-strict", "network": NET,
                   "containerID": "stuck1", "ifname": "eth0", "pod": "ns1/db-0",
                   "error": {"code": 999, "msg": "server_socket is required in cni.conf"}}
        log_lines(self.log, [{**failing, "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                             time.gmtime(t))}
                             for t in (old, time.time() - 60)])
        os.chmod(self.log, 0o600)

    def wrapped(self) -> bool:
        try:
            return json.loads((self.net / "00-multus.conf").read_text())["type"] == "cni-delguard"
        except (OSError, ValueError, KeyError):
            return False


@pytest.fixture(scope="module")
def pod(image, tmp_path_factory):
    """The watcher's container on the node (the image's default command), as $POD."""
    node = Node(with_shell(tmp_path_factory.mktemp("node") / "root"))
    r = podman("run", "--detach", *pod_options(node), image, timeout=300)
    assert r.returncode == 0, r.stderr
    cid = r.stdout.strip()
    try:
        wait_for(node.wrapped, "the watcher to wrap the conf", 120, every=0.2,
                 detail=lambda: podman("logs", cid).stdout)
        yield cid, node
    finally:
        podman("stop", "--time", "10", cid)
        podman("rm", "--force", cid)


def in_pod(cid: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return podman("exec", cid, *argv, timeout=300)


def check_tool_run(argv: list[str], r: subprocess.CompletedProcess[str]) -> None:
    said = r.stdout + r.stderr
    assert "executable file" not in said and "not found in $PATH" not in said, said
    assert "Traceback" not in said, said
    assert r.returncode in OK_CODES.get(argv[1], {0}), (argv, r.returncode, said)
    assert said.strip(), argv


# ---- the commands ----------------------------------------------------------------------------


@pytest.mark.parametrize("command", by_kind("exec"))
def test_each_exec_command_runs_in_the_watchers_pod(pod, command):
    """In document order (the uninstall of PluginBroken's runbook before the install of
    ObserveWouldFree's): each on the node as the one before it left it."""
    cid, node = pod
    m = EXEC.match(FINDER.sub("$POD", command))
    assert m[1] == NAMESPACE and m[2] == "$POD", command
    argv = shlex.split(m[3])
    r = in_pod(cid, argv)
    check_tool_run(argv, r)
    if argv[1] == "uninstall":
        assert (node.net / "00-multus.conf").read_text() == MULTUS_CONF
    if argv[1:3] == ["install", "--root"] and "--dry-run" not in argv:
        conf = json.loads((node.net / "00-multus.conf").read_text())
        assert conf["type"] == "cni-delguard" and conf.get("mode") == argv[argv.index("--mode") + 1]


def test_doctors_own_commands_run_in_the_pod_as_printed(pod):
    """doctor in the pod prints its commands with --root /host; the runbook's exec prefix
    followed by each one runs it there (the release frees exactly the stuck attachment)."""
    cid, node = pod
    (prefix,) = set(by_kind("exec-prefix"))
    assert EXEC.match(prefix + " x")[2] == "$POD"
    r = in_pod(cid, ["cni-delguard", "doctor", "--root", "/host"])
    printed = re.findall(r"(cni-delguard release .*)$", r.stdout, re.M)
    printed += re.findall(r"`(cni-delguard [^`]+)`", r.stdout)
    assert any(p.startswith("cni-delguard release --root /host") for p in printed), r.stdout
    for command in printed:
        argv = shlex.split(command)
        done = in_pod(cid, argv)
        check_tool_run(argv, done)
    released = sorted(p.name for p in (node.state / "networks" / NET).glob("*.release"))
    assert released == ["stuck1:eth0.release"]


@pytest.mark.parametrize("command", by_kind("debug"))
def test_each_debug_command_runs_on_the_node(pod, busybox, command):
    """`kubectl debug node/$NODE` gives a container the node's / at /host, its network and its
    PIDs: the same here, read-only, with a listener of the test's own that netstat must show."""
    _, node = pod
    m = DEBUG.match(command)
    assert m[1] == "$NODE" and m[2] in DEBUG_IMAGES, command
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        r = podman("run", "--rm", *LIMITS, "--network", "host", "--pid", "host", "--read-only",
                   "--volume", f"{node.root}:/host:ro", DEBUG_IMAGES[m[2]],
                   *shlex.split(m[3]))
    assert r.returncode == 0, (command, r.stdout + r.stderr)
    assert r.stdout.strip(), command
    tool = shlex.split(m[3])[0]
    if tool == "netstat":
        assert f"127.0.0.1:{port}" in r.stdout
    if tool == "ls":
        assert "00-multus.conf" in r.stdout


def unreachable_kubeconfig(tmp_path: Path) -> Path:
    port = free_port()
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
              "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
              "users": [{"name": "u", "user": {"token": "x"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def kubectl_lines() -> list[str]:
    """Every kubectl command line of the runbooks, the pod finders inside others included."""
    found = []
    for command in ALL:
        found += FINDER.findall(command)
        if kind(command) in ("kubectl", "exec", "debug"):
            found.append(FINDER.sub("pod/cni-delguard-x", command))
    return sorted(set(found))


@pytest.mark.parametrize("command", kubectl_lines())
def test_each_kubectl_command_line_is_one_kubectl_accepts(command, tmp_path):
    argv = shlex.split(command.replace("$NODE", NODE).replace("$POD", "pod/cni-delguard-x"))
    assert argv[0] == "kubectl"
    r = subprocess.run([kubectl(), f"--kubeconfig={unreachable_kubeconfig(tmp_path)}",
                        "--request-timeout=5s", *argv[1:]], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=120, check=False, cwd=REPO)
    said = r.stdout + r.stderr
    assert r.returncode != 0
    assert "connection refused" in said, (command, said)
    assert "unknown" not in said.lower() and "usage" not in said.lower(), (command, said)


# ---- amtool against a real Alertmanager ----------------------------------------------------


@pytest.fixture
def alertmanager(tmp_path):
    binary = shutil.which("prometheus-alertmanager")
    if binary is None:
        pytest.fail("no Alertmanager: tools/install-test-deps.sh installs Debian's")
    port = free_port()
    config = tmp_path / "alertmanager.yml"
    config.write_text(yaml.safe_dump({"route": {"receiver": "none"},
                                      "receivers": [{"name": "none"}]}))
    log = (tmp_path / "alertmanager.log").open("wb")
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert proc.poll() is None, (tmp_path / "alertmanager.log").read_text()
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:  # noqa: S310
                return r.status == 200
        except OSError:
            return False

    try:
        wait_for(ready, "Alertmanager to be ready", 60, every=0.2)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def api(url: str, path: str, body: object | None = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{url}/api/v2/{path}", data=data,  # noqa: S310 - loopback
                                 method="POST" if data else "GET",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310 - loopback
        raw = r.read()
    return json.loads(raw) if raw else None


@pytest.mark.parametrize("command", by_kind("amtool"))
def test_each_silence_silences_the_alert_it_names(alertmanager, command, tmp_path):
    """The alert as its rule raises it (its labels: alertname, node, job, namespace, severity),
    sent to Alertmanager; the runbook's amtool command, with amtool's config file naming the
    Alertmanager as an on-call's would, must silence it."""
    argv = shlex.split(command.replace("$NODE", NODE))
    matchers = dict(a.split("=", 1) for a in argv if re.fullmatch(r"\w+=[^=].*", a))
    assert set(matchers) == {"alertname", "node"}, command
    labels = {**matchers, "job": "cni-delguard", "namespace": NAMESPACE, "severity": "warning"}
    api(alertmanager, "alerts", [{"labels": labels}])
    home = tmp_path / "home"
    (home / ".config/prometheus").mkdir(parents=True)  # where amtool looks (amtool --help)
    (home / ".config/prometheus/amtool.yml").write_text(f"alertmanager.url: {alertmanager}\n")
    r = subprocess.run(argv, env={"HOME": str(home), "PATH": os.environ["PATH"]},
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stdout + r.stderr

    def silenced() -> bool:
        alerts = api(alertmanager, "alerts?silenced=true")
        assert isinstance(alerts, list)
        return any(a["labels"]["alertname"] == matchers["alertname"]
                   and a["status"]["silencedBy"] for a in alerts)

    wait_for(silenced, "the alert silenced", 60, every=0.2,
             detail=lambda: str(api(alertmanager, "alerts")))
