"""The frozen bundle on hostile hosts (issue 28): what a node hands the guard besides the CNI call.

- A preload the bundle's loader cannot satisfy (a library that needs GLIBC_2.38, in LD_PRELOAD
  or the node's /etc/ld.so.preload) never stops the guard, and the delegate still gets the
  runtime's LD_PRELOAD, unchanged, and loads it.
- A failure after the launcher's exec (libpython missing, the standard library's `encodings`
  missing, a library of the bundle missing) still gives the runtime a CNI error on stdout.
- Without /proc the launcher finds its folder from the path the kernel exec'd (AT_EXECFN): a bare
  argv[0], a PATH search, a relative path, a symlink, a foreign argv[0], with /proc and without.
- The bundle's loader searches only the bundle: a node whose lib dirs hold poisoned libraries
  (a libc, a libz) never gets one loaded into the guard, not even one the bundle lacks.
- The guard's process name (comm) is cni-delguard, whatever name it was exec'd by.
- OpenSSL never starts in the plugin: an OpenSSL config in the runtime's environment (or the
  host's default one) that names a provider module never gets that module loaded into the guard.

Against the frozen build of main (41b7b80), 14 of these 22 cases failed (every finding at least
once); the others (with /proc, a complete bundle) are checks that the fixes broke nothing.
Everything runs chrooted into small roots under tmp_path (busybox, the bundle, the libraries of
tests/fakes/hostlibs), never on the host's own /etc or lib dirs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import guard, hostlibs
from tests.support.noderoot import needs_root, proc_mounted, with_shell
from tests.support.paths import widen
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chroot roots, root-owned state dirs")

ANSWER = "supportedVersions"
SYSTEM_DIRS = {
    "x86_64": ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib", "usr/lib"),
    "aarch64": ("lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu", "lib", "usr/lib"),
}[os.uname().machine]
ENV_DUMPER = """cat >/dev/null
env > "$DUMP_TO"
printf '{"cniVersion":"1.0.0","interfaces":[],"ips":[]}'
"""


@pytest.fixture(scope="module")
def frozen() -> Path:
    """The bundle's folder."""
    return guard.frozen_or_skip().resolve().parent


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dgbn-libs")
    hostlibs.newer_glibc(out)
    hostlibs.marker(out)
    return out


def node_root(root: Path, bundle: Path) -> Path:
    """A node: busybox, the bundle at /opt/delguard/cni-delguard, /opt/cni/bin/cni-delguard a
    relative symlink to its executable (as the installer puts it), /tmp, a root-owned state dir."""
    with_shell(root)
    shutil.copytree(bundle, root / "opt/delguard/cni-delguard", symlinks=True)
    (root / "opt/cni/bin").mkdir(parents=True)
    widen(root / "opt/cni/bin")  # the node's state and log are under /tmp
    (root / "opt/cni/bin/cni-delguard").symlink_to("../../delguard/cni-delguard/cni-delguard")
    (root / "tmp").mkdir(mode=0o1777)
    (root / "tmp/state").mkdir(mode=0o700)
    return root


def in_root(root: Path, argv: list[str], env: dict[str, str], stdin: bytes = b"",
            cwd: str = "/", executable: str | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run `argv` with `root` as / and `cwd` (inside it) as the working dir, as a runtime on that
    node would: `executable` is the path exec'd, argv[0] whatever the caller passes."""
    def enter() -> None:
        os.chroot(root)
        os.chdir(cwd)

    return subprocess.run(argv, executable=executable, env=env, input=stdin, capture_output=True,
                          timeout=60, check=False, preexec_fn=enter)


def skip_del(root: Path, run_env: dict[str, str] | None = None, **kw: object):
    """A DEL with no evidence inside the root: exit 0, nothing on stdout, when the guard runs."""
    conf = {"cniVersion": "1.0.0", "name": "n", "type": "cni-delguard",
            "delegate": {"type": "bridge"}, "stateDir": "/tmp/state", "logFile": "/tmp/log"}
    env = {"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "hostile-0123456789", "CNI_IFNAME": "eth0",
           "CNI_NETNS": "/var/run/netns/none", "CNI_PATH": "/opt/cni/bin", **(run_env or {})}
    return in_root(root, ["/opt/cni/bin/cni-delguard"], env, json.dumps(conf).encode(), **kw)


def version(root: Path, run_env: dict[str, str] | None = None, **kw: object):
    return in_root(root, kw.pop("argv", ["/opt/cni/bin/cni-delguard"]),  # type: ignore[arg-type]
                   {"CNI_COMMAND": "VERSION", **(run_env or {})}, **kw)  # type: ignore[arg-type]


def answered(proc: subprocess.CompletedProcess[bytes]) -> bool:
    return proc.returncode == 0 and ANSWER in proc.stdout.decode(errors="replace")


# -- preloads ----------------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["LD_PRELOAD", "ld.so.preload"])
def test_a_preload_built_for_a_newer_glibc_never_stops_the_guard(
    tmp_path: Path, frozen: Path, libs: Path, where: str
) -> None:
    """A host whose preload needs GLIBC_2.38: the host's own older programs fail (as here the
    busybox root has no loader to fail), the guard answers VERSION and skips a stale DEL."""
    root = node_root(tmp_path / "root", frozen)
    (root / "lib").mkdir(exist_ok=True)
    shutil.copy2(libs / "libdgbn-newer.so", root / "lib" / "libdgbn-newer.so")
    run_env = {}
    if where == "LD_PRELOAD":
        run_env["LD_PRELOAD"] = "/lib/libdgbn-newer.so"
    else:
        (root / "etc").mkdir(exist_ok=True)
        (root / "etc/ld.so.preload").write_text("/lib/libdgbn-newer.so\n")
    v = version(root, run_env)
    assert answered(v), (v.returncode, v.stdout, v.stderr)
    d = skip_del(root, run_env)
    assert (d.returncode, d.stdout) == (0, b""), d.stderr
    assert '"decision": "skip"' in (root / "tmp/log").read_text()


def test_the_delegate_gets_the_runtimes_preload_and_loads_it_the_guard_does_not(
    tmp_path: Path, frozen: Path, libs: Path
) -> None:
    """LD_PRELOAD (a harmless library built for this host's glibc) reaches the delegate exactly
    as the runtime set it, and the delegate (a dynamic /bin/sh script) loads it; the guard's own
    process never does (packaging/README.md: the guard loads no host preload)."""
    lab = tmp_path
    (lab / "bin").mkdir()
    widen(lab / "bin")
    (lab / "state").mkdir(mode=0o700)
    (lab / "bin/cni-delguard").symlink_to(frozen / "cni-delguard")
    dumper = lab / "bin/env-dumper"
    dumper.write_text("#!/bin/sh\n" + ENV_DUMPER)
    dumper.chmod(0o755)
    marks, dump = lab / "marks", lab / "delegate.env"
    preload = f"{libs / 'libdgbn-marker.so'}"
    conf = {"cniVersion": "1.0.0", "name": "n", "type": "cni-delguard",
            "delegate": {"type": "env-dumper"}, "stateDir": str(lab / "state"),
            "logFile": str(lab / "log")}
    env = {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "hostile-add", "CNI_IFNAME": "eth0",
           "CNI_NETNS": "/var/run/netns/none", "CNI_PATH": str(lab / "bin"),
           "PATH": "/usr/bin:/bin", "LD_PRELOAD": preload, "DGBN_MARKS": str(marks),
           "DUMP_TO": str(dump), "LANG": "C.UTF-8"}
    with subprocess.Popen([str(lab / "bin/cni-delguard")], env=env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        out, err = proc.communicate(json.dumps(conf).encode(), timeout=60)
    assert proc.returncode == 0, (out, err)
    seen = dict(line.split("=", 1) for line in dump.read_text().splitlines() if "=" in line)
    assert seen["LD_PRELOAD"] == preload
    assert {k: seen.get(k) for k in env if k != "CNI_COMMAND"} == {
        k: v for k, v in env.items() if k != "CNI_COMMAND"}
    assert not [k for k in seen if k.startswith(("_DELGUARD", "_PYI_", "LC_ALL", "LD_AUDIT"))]
    loaded = hostlibs.marks(marks)
    assert [comm for pid, comm in loaded if pid != proc.pid], "the delegate did not load it"
    assert [pid for pid, _ in loaded if pid == proc.pid] == [], loaded


OPENSSL_CNF = """openssl_conf = init
[init]
providers = providers
[providers]
dgbn = dgbn
[dgbn]
module = {module}
activate = 1
"""


def test_openssl_never_starts_in_the_plugin(tmp_path: Path, frozen: Path, libs: Path) -> None:
    """An OpenSSL config can name provider modules, which OpenSSL loads by absolute path when it
    starts: host code in the guard. pydantic imports secrets -> hmac -> _hashlib, which started
    the bundled libcrypto on the first ADD of every config (its validation) and read the host's
    /usr/lib/ssl/openssl.cnf or $OPENSSL_CONF; with _hashlib left out of the bundle nothing in
    the plugin starts OpenSSL (hashlib and hmac fall back to CPython's own digests). The config
    here names the marker library as a provider: the first ADD, a second one and a stale DEL
    never load it (on the bundle of 41b7b80 the first ADD did)."""
    lab = tmp_path
    (lab / "bin").mkdir()
    widen(lab / "bin")
    (lab / "state").mkdir(mode=0o700)
    (lab / "bin/cni-delguard").symlink_to(frozen / "cni-delguard")
    dumper = lab / "bin/env-dumper"
    dumper.write_text("#!/bin/sh\n" + ENV_DUMPER)
    dumper.chmod(0o755)
    marks = lab / "marks"
    cnf = lab / "openssl.cnf"
    cnf.write_text(OPENSSL_CNF.format(module=libs / "libdgbn-marker.so"))
    conf = {"cniVersion": "1.0.0", "name": "n", "type": "cni-delguard",
            "delegate": {"type": "env-dumper"}, "stateDir": str(lab / "state"),
            "logFile": str(lab / "log")}
    base = {"CNI_IFNAME": "eth0", "CNI_NETNS": "/var/run/netns/none", "CNI_PATH": str(lab / "bin"),
            "PATH": "/usr/bin:/bin", "OPENSSL_CONF": str(cnf), "DGBN_MARKS": str(marks),
            "DUMP_TO": str(lab / "delegate.env")}
    pids = []
    for command, container in (("ADD", "ossl-1"), ("ADD", "ossl-2"), ("DEL", "ossl-none")):
        env = {**base, "CNI_COMMAND": command, "CNI_CONTAINERID": container}
        with subprocess.Popen([str(lab / "bin/cni-delguard")], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            out, err = proc.communicate(json.dumps(conf).encode(), timeout=60)
        assert proc.returncode == 0, (command, out, err)
        pids.append(proc.pid)
    assert [pid for pid, _ in hostlibs.marks(marks) if pid in pids] == [], hostlibs.marks(marks)
    assert not list(frozen.glob("_internal/**/_hashlib*")), "_hashlib is back in the bundle"


# -- a CNI error for every failure after the launcher's exec -------------------------------------

def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()


@pytest.mark.parametrize(("missing", "said"), [
    pytest.param("_internal/libpython3.11.so.1.0", "libpython3.11.so.1.0", id="libpython"),
    pytest.param("_internal/encodings", "encodings", id="encodings"),
    pytest.param("_internal/libz.so.1", "libz.so.1", id="a-library-the-loader-needs"),
])
@pytest.mark.parametrize("command", ["VERSION", "ADD"])
def test_a_failure_after_the_launchers_exec_is_a_cni_error(
    tmp_path: Path, frozen: Path, missing: str, said: str, command: str
) -> None:
    bundle = tmp_path / "cni-delguard"
    shutil.copytree(frozen, bundle, symlinks=True)
    remove(bundle / missing)
    env = {"CNI_COMMAND": command, "CNI_CONTAINERID": "c1", "CNI_IFNAME": "eth0",
           "CNI_NETNS": "/var/run/netns/none", "CNI_PATH": "/opt/cni/bin"}
    proc = subprocess.run([str(bundle / "cni-delguard")], env=env, input=b"{}",
                          capture_output=True, timeout=60, check=False)
    assert proc.returncode != 0
    body = json.loads(proc.stdout)
    assert body["code"] == 999, body
    assert "before its own code ran" in body["msg"], body
    assert said in body["details"], body
    assert said in proc.stderr.decode(errors="replace"), "stderr no longer passes through"


# -- finding its own folder without /proc --------------------------------------------------------

# (how the runtime execs it, argv, the path exec'd, cwd, PATH): every one names the link in the
# node's CNI bin dir, a relative symlink into the bundle.
WAYS = [
    pytest.param(["/opt/cni/bin/cni-delguard"], None, "/", None, id="symlinked-full-path"),
    pytest.param(["cni-delguard"], "/opt/cni/bin/cni-delguard", "/", None, id="bare-argv0"),
    pytest.param(["cni-delguard"], None, "/", "/opt/cni/bin", id="PATH-search"),
    pytest.param(["bin/cni-delguard"], None, "/opt/cni", None, id="relative-path"),
    pytest.param(["/bin/busybox"], "/opt/cni/bin/cni-delguard", "/", None, id="foreign-argv0"),
]


@pytest.fixture(scope="module")
def shared_root(tmp_path_factory: pytest.TempPathFactory, frozen: Path) -> Path:
    needs_root()
    return node_root(tmp_path_factory.mktemp("dgbn-noproc") / "root", frozen)


@pytest.fixture(params=["proc", "no-proc"])
def proc(request: pytest.FixtureRequest, shared_root: Path) -> Iterator[str]:
    if request.param == "proc":
        with proc_mounted(shared_root):
            yield request.param
    else:
        assert not (shared_root / "proc/self").exists()
        yield request.param


@pytest.mark.parametrize(("argv", "executable", "cwd", "path"), WAYS)
def test_it_finds_its_folder_however_it_was_execd(
    shared_root: Path, proc: str, argv: list[str], executable: str | None, cwd: str,
    path: str | None
) -> None:
    env = {"PATH": path} if path else {}
    v = version(shared_root, env, argv=argv, executable=executable, cwd=cwd)
    assert answered(v), (v.returncode, v.stdout, v.stderr)


# -- the loader searches only the bundle ---------------------------------------------------------

@pytest.mark.parametrize("bundle_lacks", [None, "libz.so.1"])
def test_poisoned_host_lib_dirs_are_never_searched(
    tmp_path: Path, frozen: Path, bundle_lacks: str | None
) -> None:
    """Every system lib dir of the node holds a poisoned libc.so.6 and libz.so.1 (a constructor
    that marks the file /dgbn-loaded): none is ever loaded into the guard, not even the libz the
    bundle lacks (the loader of main found it there and ran it); the guard then fails with a CNI
    error naming the library instead."""
    root = node_root(tmp_path / "root", frozen)
    for sub in SYSTEM_DIRS:
        for name in ("libc.so.6", "libz.so.1"):
            hostlibs.marker(root / sub, name, marks="/dgbn-loaded", soname=name)
    if bundle_lacks:
        (root / "opt/delguard/cni-delguard/_internal" / bundle_lacks).unlink()
    v = version(root)
    assert not (root / "dgbn-loaded").exists(), hostlibs.marks(root / "dgbn-loaded")
    if bundle_lacks is None:
        assert answered(v), (v.returncode, v.stdout, v.stderr)
        assert (skip_del(root).returncode, (root / "dgbn-loaded").exists()) == (0, False)
    else:
        assert v.returncode != 0
        assert bundle_lacks in json.loads(v.stdout)["details"]


# -- its name --------------------------------------------------------------------------------------

HOLDING_DELEGATE = """#!/bin/sh
cat >/dev/null
: > "$STARTED"
while [ ! -e "$GO" ]; do sleep 0.02; done
printf '{"cniVersion":"1.0.0","interfaces":[],"ips":[]}'
"""


def test_its_process_name_is_cni_delguard_whatever_name_it_was_execd_by(
    tmp_path: Path, frozen: Path
) -> None:
    (tmp_path / "bin").mkdir()
    widen(tmp_path / "bin")
    (tmp_path / "state").mkdir(mode=0o700)
    link = tmp_path / "bin/delguard-by-another-name"
    link.symlink_to(frozen / "cni-delguard")
    holder = tmp_path / "bin/holder"
    holder.write_text(HOLDING_DELEGATE)
    holder.chmod(0o755)
    started, go = tmp_path / "started", tmp_path / "go"
    conf = {"cniVersion": "1.0.0", "name": "n", "type": "cni-delguard",
            "delegate": {"type": "holder"}, "stateDir": str(tmp_path / "state"),
            "logFile": str(tmp_path / "log")}
    env = {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_IFNAME": "eth0",
           "CNI_NETNS": "/var/run/netns/none", "CNI_PATH": str(tmp_path / "bin"),
           "PATH": "/usr/bin:/bin", "STARTED": str(started), "GO": str(go)}
    with subprocess.Popen([str(link)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as proc:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(conf).encode())
        proc.stdin.close()
        try:
            def delegate_started() -> bool:
                assert proc.poll() is None, "the guard exited before a delegate started"
                return started.exists()

            wait_for(delegate_started, "a delegate to start", 60, every=0.02)
            comm = Path(f"/proc/{proc.pid}/comm").read_text().strip()
        finally:
            go.touch()
            out = proc.stdout.read() if proc.stdout else b""
            err = proc.stderr.read() if proc.stderr else b""
            proc.wait(timeout=60)
    assert proc.returncode == 0, (out, err)
    assert comm == "cni-delguard"
