"""The frozen guard on hosts whose userland is not the build machine's (issues 17 and 18).

The runtime execs a plugin with the host's own userland. Here a bundle is installed with
`install --root R` into a node root R, and then run the way the runtime runs it, with R as /
(chroot R, inside an outer network namespace of the test's own), never through this machine's
libraries:

- `bullseye`: Debian 11, glibc 2.31 (older than the 2.35 the bundle's own libpython needed), made
  with debootstrap (tools/make-root.sh), with Debian 11's own containernetworking-plugins (0.9.0):
  the delegate is its `loopback`, in a real network namespace bind-mounted into R;
- `no-libc`: only directories, the conf and a static test delegate (tests/fakes/static_delegate):
  a host with no C library at all, as Talos without its glibc extension, or a musl host; and the
  same root without /proc (`no-libc-no-proc`: the launcher finds its folder from argv[0], and the
  guard's state dirs are made without /proc's help);
- `arm64`: a Debian 12 arm64 root (tools/build.sh's arm64 build root) with Debian's arm64
  containernetworking-plugins, and the arm64 bundle (tools/build.sh --arch arm64), whose own
  installer installs it: everything in it runs under qemu-user (binfmt_misc), the guard and the
  delegates, bridge + host-local in a real network namespace (their netlink calls go through
  qemu-user's translation and work).

On each: VERSION answers; a DEL with no evidence skips (exit 0, nothing on stdout, logged); an ADD
through the delegate returns the delegate's result and the delegate's own state shows it (lo up,
a state file, an IP lease); CHECK passes; the DEL after it reaches the delegate (that state gone);
`ready --root R` and `doctor --root R` pass; `uninstall --root R` restores the conf byte for byte.
/proc is mounted in R (but in `no-libc-no-proc`), as every host has it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import guard
from tests.support.guard import HOST_ARCH
from tests.support.netns import Netns, NetnsSet, ip
from tests.support.noderoot import bound_file, needs_root, overlay, proc_mounted
from tests.support.records import guard_log

REPO = Path(__file__).resolve().parents[2]
CHROOT = "/usr/sbin/chroot"
CID = "anyhost-0123456789"


@dataclass
class NodeRoot:
    root: Path
    conf_name: str
    conf: dict[str, Any]
    outer: Netns  # where the plugin runs (a bridge is made there, never in the host's)
    inner: Netns  # the pod's
    attached: Callable[[], bool]  # the delegate's own evidence that the attachment is there
    bundle: Path  # the frozen binary whose installer puts it on this node
    proc: bool = True  # /proc mounted in the root, as on every host

    @property
    def conf_path(self) -> Path:
        return self.root / "etc/cni/net.d" / self.conf_name

    def plugin_stdin(self, prev_result: Any = None) -> dict[str, Any]:
        """What libcni hands the first plugin of the (wrapped) conflist."""
        conf = json.loads(self.conf_path.read_text())
        entry = conf["plugins"][0] | {"name": conf["name"], "cniVersion": conf["cniVersion"]}
        if prev_result is not None:
            entry["prevResult"] = prev_result
        return entry

    def run_plugin(self, command: str, stdin: dict[str, Any]) -> tuple[int, Any]:
        """The guard exec'd as the runtime execs it, with this root as /."""
        return guard.exec_cni(Path("/opt/cni/bin"), command, stdin, cid=CID,
                              netns_path=f"/run/netns/{self.inner.name}",
                              prefix=(*self.outer.exec_argv([]), CHROOT, str(self.root)))

    def installer(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """The bundle's operator commands, run from this machine's view with the node at
        --root (as the DaemonSet's container runs them)."""
        return subprocess.run([str(self.bundle), *argv, "--root", str(self.root)],
                              capture_output=True, text=True, timeout=600, check=False)

    def decisions(self) -> list[str]:
        log = self.root / "var/log/cni-delguard/delguard.log"
        return [f"{line['command']}:{line['decision']}" for line in guard_log(log)]


def template(suite: str, arch: str, *packages: str) -> Path:
    made = subprocess.run([str(REPO / "tools/make-root.sh"), suite, arch, *packages],
                          capture_output=True, text=True, check=False, timeout=3600)
    assert made.returncode == 0, made.stderr
    return Path(made.stdout.strip())


def build_root(arch: str) -> Path:
    """tools/build.sh's Debian bookworm root of `arch`, which holds Debian's CNI plugins too."""
    made = subprocess.run([str(REPO / "tools/build.sh"), "--root-template", "--arch", arch],
                          capture_output=True, text=True, check=False, timeout=3600)
    assert made.returncode == 0, made.stderr
    return Path(made.stdout.strip())


def lo_up(ns: Netns) -> bool:
    flags = ns.links()["lo"].get("flags", [])
    return isinstance(flags, list) and "UP" in flags


@contextlib.contextmanager
def bullseye(tmp: Path, outer: Netns, inner: Netns, fake: Path) -> Iterator[NodeRoot]:
    with overlay(template("bullseye", HOST_ARCH, "containernetworking-plugins"),
                 tmp / "bullseye") as root:
        (root / "opt/cni/bin").mkdir(parents=True)
        (root / "opt/cni/bin/loopback").symlink_to("../../../usr/lib/cni/loopback")
        (root / "etc/cni/net.d").mkdir(parents=True)
        conf = {"cniVersion": "0.4.0", "name": "lo-net", "plugins": [{"type": "loopback"}]}
        ip("-n", inner.name, "link", "set", "lo", "down")
        yield NodeRoot(root, "10-lo.conflist", conf, outer, inner, lambda: lo_up(inner),
                       guard.frozen_binary())


@contextlib.contextmanager
def no_libc(tmp: Path, outer: Netns, inner: Netns, fake: Path) -> Iterator[NodeRoot]:
    root = tmp / "no-libc"
    # /var/log as every host has it: the guard makes its own log dir only as a leaf of a dir
    # that exists (guard/paths.py creatable), never a missing parent.
    for d in ("opt/cni/bin", "etc/cni/net.d", "tmp", "proc", "run/netns", "var/log"):
        (root / d).mkdir(parents=True)
    (root / "tmp").chmod(0o1777)
    shutil.copy(fake, root / "opt/cni/bin/static-fake")
    conf = {"cniVersion": "1.0.0", "name": "static-net",
            "plugins": [{"type": "static-fake", "stateDir": "/tmp",
                         "recordFile": "/tmp/calls.jsonl"}]}
    yield NodeRoot(root, "10-static.conflist", conf, outer, inner,
                   (root / f"tmp/{CID}:eth0").exists, guard.frozen_binary())


@contextlib.contextmanager
def arm64(tmp: Path, outer: Netns, inner: Netns, fake: Path) -> Iterator[NodeRoot]:
    bundle = guard.frozen_or_skip_for("arm64")
    with overlay(build_root("arm64"), tmp / "arm64") as root:
        (root / "opt/cni/bin").mkdir(parents=True)
        for plugin in ("bridge", "host-local"):
            (root / "opt/cni/bin" / plugin).symlink_to(f"../../../usr/lib/cni/{plugin}")
        (root / "etc/cni/net.d").mkdir(parents=True)
        conf = {"cniVersion": "1.0.0", "name": "arm-net", "plugins": [
            {"type": "bridge", "bridge": "dgarm0", "isGateway": True, "ipMasq": False,
             "ipam": {"type": "host-local", "subnet": "10.99.7.0/24"}}]}
        leases = root / "var/lib/cni/networks/arm-net"

        def leased() -> bool:
            return leases.is_dir() and any(
                p.read_text().strip().startswith(CID) for p in leases.glob("10.*"))

        yield NodeRoot(root, "10-bridge.conflist", conf, outer, inner, leased, bundle)


@contextlib.contextmanager
def no_libc_no_proc(
    tmp: Path, outer: Netns, inner: Netns, fake: Path
) -> Iterator[NodeRoot]:
    """The same root with no /proc either: nothing the guard or its launcher needs is there."""
    with no_libc(tmp, outer, inner, fake) as made:
        made.proc = False
        yield made


ROOTS = {"bullseye": bullseye, "no-libc": no_libc, "no-libc-no-proc": no_libc_no_proc,
         "arm64": arm64}


@pytest.fixture(params=list(ROOTS))
def node(
    request: pytest.FixtureRequest, tmp_path: Path, static_fake: Path
) -> Iterator[NodeRoot]:
    needs_root()
    guard.frozen_or_skip()
    namespaces = NetnsSet(prefix="dgany")
    with contextlib.ExitStack() as stack:
        stack.callback(namespaces.close)
        outer, inner = namespaces.new("o"), namespaces.new("i")
        made = stack.enter_context(ROOTS[request.param](tmp_path, outer, inner, static_fake))
        if made.proc:
            stack.enter_context(proc_mounted(made.root))
        stack.enter_context(bound_file(inner.path, made.root, f"/run/netns/{inner.name}"))
        made.conf_path.write_text(json.dumps(made.conf, indent=1) + "\n")
        yield made


def test_installed_guard_runs_there_as_the_runtime_runs_it(node: NodeRoot) -> None:
    original = node.conf_path.read_bytes()
    delegate = node.conf["plugins"][0]["type"]
    r = node.installer("install", "--wrap", delegate)
    assert r.returncode == 0, r.stderr
    assert json.loads(node.conf_path.read_text())["plugins"][0]["type"] == "cni-delguard"
    r = node.installer("ready")
    assert r.returncode == 0, r.stdout + r.stderr
    r = node.installer("doctor", "--json")
    plugins = [f for f in json.loads(r.stdout)["findings"] if f["check"] == "plugins"]
    assert plugins and all(f["severity"] == "ok" for f in plugins), plugins

    code, out = node.run_plugin("VERSION", {"cniVersion": "1.0.0"})
    assert code == 0 and "1.0.0" in out["supportedVersions"], out
    assert not node.attached()
    code, out = node.run_plugin("DEL", node.plugin_stdin())
    assert (code, out) == (0, None)
    code, result = node.run_plugin("ADD", node.plugin_stdin())
    assert code == 0, result
    assert "interfaces" in result and "code" not in result, result
    assert node.attached()  # the delegate's ADD did its work
    code, out = node.run_plugin("CHECK", node.plugin_stdin(prev_result=result))
    assert (code, out) == (0, None)
    code, out = node.run_plugin("DEL", node.plugin_stdin(prev_result=result))
    assert (code, out) == (0, None)
    assert not node.attached()  # the delegate's DEL undid it
    assert node.decisions() == [
        "DEL:skip", "ADD:add-completed", "CHECK:forward", "DEL:forward-strict"
    ]

    r = node.installer("uninstall")
    assert r.returncode == 0, r.stderr
    assert node.conf_path.read_bytes() == original
    assert not (node.root / "opt/cni/bin/cni-delguard").exists()
