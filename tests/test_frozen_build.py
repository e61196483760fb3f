"""The frozen bundle (tools/build.sh) reached the ways a runtime reaches it in /opt/cni/bin.

The bundle lives in its own dir and the name in the CNI bin dir is a symlink to its executable:
an absolute or a relative one, found by path or by PATH lookup, with any argv[0]. Each way must
answer VERSION and skip a DEL that has no evidence (exit 0, nothing on stdout). No timing here:
speed is the benchmark's business (python -m benchmarks).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import confs, guard
from tests.support.paths import widen


@pytest.fixture(scope="module")
def bundle() -> Path:
    return guard.frozen_or_skip()


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    """tmp_path/bin (where symlinks go), tmp_path/elsewhere (the cwd), private guard state."""
    for sub in ("bin", "elsewhere", "results", "multus"):
        (tmp_path / sub).mkdir()
    (tmp_path / "state").mkdir(mode=0o700)
    widen(tmp_path / "bin")  # the lab's state and log are under the temp dir
    return tmp_path


def lab_conf(lab: Path, delegate: str = "bridge") -> bytes:
    conf = confs.guard_conf(
        {"type": delegate},
        network="n",
        state_dir=lab / "state",
        log_file=lab / "log",
        result_cache_dirs=[lab / "results"],
        multus_cache_dirs=[lab / "multus"],
    )
    return json.dumps(conf).encode()


def cni_env(command: str, lab: Path, **extra: str) -> dict[str, str]:
    return {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": "frozen-0123456789abcdef",
        "CNI_IFNAME": "eth0",
        "CNI_PATH": f"{lab / 'bin'}:/usr/lib/cni",
        "PATH": f"{lab / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin",
        **extra,
    }


def link(lab: Path, bundle: Path, kind: str) -> Path:
    """bin/cni-delguard -> the bundle's executable, absolute or relative."""
    bin_link = lab / "bin" / "cni-delguard"
    dest = bundle.resolve()
    bin_link.symlink_to(dest if kind == "absolute" else os.path.relpath(dest, bin_link.parent))
    return bin_link


def run(
    argv: list[str], env: dict[str, str], stdin: bytes, cwd: Path, executable: str | None = None
):
    return subprocess.run(
        argv,
        executable=executable,
        env=env,
        input=stdin,
        cwd=cwd,
        capture_output=True,
        timeout=60,
        check=False,
    )


# (link kind, how it is called): argv[0] as a runtime might pass it, run from another dir.
WAYS = [
    pytest.param("absolute", "full path", id="absolute-symlink"),
    pytest.param("relative", "full path", id="relative-symlink"),
    pytest.param("relative", "relative path", id="relative-symlink-relative-argv0"),
    pytest.param("absolute", "PATH lookup", id="absolute-symlink-via-PATH"),
    pytest.param("relative", "PATH lookup", id="relative-symlink-via-PATH"),
    pytest.param("relative", "bare argv0", id="relative-symlink-bare-argv0"),
]


def invoke(lab: Path, bundle: Path, kind: str, how: str, env: dict[str, str], stdin: bytes):
    exe = link(lab, bundle, kind)
    cwd = lab / "elsewhere"
    if how == "full path":
        return run([str(exe)], env, stdin, cwd)
    if how == "relative path":
        return run(["../bin/cni-delguard"], env, stdin, cwd)
    if how == "PATH lookup":
        return run(["cni-delguard"], env, stdin, cwd)
    # A bare argv[0] that names nothing on PATH: the executable must not depend on it.
    return run(["cni-delguard"], {**env, "PATH": "/usr/bin:/bin"}, stdin, cwd, str(exe))


@pytest.mark.parametrize(("kind", "how"), WAYS)
def test_version_through_symlink(bundle: Path, lab: Path, kind: str, how: str) -> None:
    proc = invoke(lab, bundle, kind, how, cni_env("VERSION", lab), b"")
    assert proc.returncode == 0, proc.stderr.decode()
    answer = json.loads(proc.stdout)
    assert "1.0.0" in answer["supportedVersions"]


@pytest.mark.parametrize(("kind", "how"), WAYS)
def test_no_evidence_del_through_symlink(bundle: Path, lab: Path, kind: str, how: str) -> None:
    proc = invoke(lab, bundle, kind, how, cni_env("DEL", lab), lab_conf(lab))
    assert (proc.returncode, proc.stdout) == (0, b""), proc.stderr.decode()


ENV_DUMPER = """#!/bin/sh
cat >/dev/null
env > "$DUMP_TO"
printf '{"cniVersion":"1.0.0","interfaces":[],"ips":[]}'
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the guard's stateDir must be owned by root")
def test_delegate_gets_the_runtime_environment(bundle: Path, lab: Path) -> None:
    """The bootloader's LD_LIBRARY_PATH (the bundle's libs) and _PYI_* never reach a delegate."""
    dumper = lab / "bin" / "env-dumper"
    dumper.write_text(ENV_DUMPER, encoding="utf-8")
    dumper.chmod(0o755)
    dump = lab / "delegate.env"
    env = cni_env(
        "ADD", lab, CNI_NETNS="/var/run/netns/none", DUMP_TO=str(dump), LD_LIBRARY_PATH="/opt/x"
    )
    proc = run([str(link(lab, bundle, "absolute"))], env, lab_conf(lab, "env-dumper"), lab)
    assert proc.returncode == 0, (proc.stdout, proc.stderr.decode())
    seen = dict(line.split("=", 1) for line in dump.read_text(encoding="utf-8").splitlines())
    assert seen["LD_LIBRARY_PATH"] == "/opt/x"
    assert not [name for name in seen if name.startswith("_PYI_") or name.endswith("_ORIG")]
    assert seen["CNI_COMMAND"] == "ADD"


def test_bundle_carries_the_metadata_pydantic_looks_up(bundle: Path) -> None:
    """pydantic scans importlib.metadata for plugins when a first model is built (a first ADD,
    as in the test above): the metadata it finds must be the bundle's, not the build machine's."""
    internal = bundle.resolve().parent / "_internal"
    for dist in ("pydantic", "pydantic_core", "filelock", "typing_extensions", "annotated_types"):
        assert list(internal.glob(f"{dist}-*.dist-info/METADATA")), f"no metadata for {dist}"


HOLDING_DELEGATE = """#!/bin/sh
cat >/dev/null
: > "$STARTED"
while [ ! -e "$GO" ]; do sleep 0.02; done
printf '{"cniVersion":"1.0.0","interfaces":[],"ips":[]}'
"""


def held_guard_maps(bundle: Path, lab: Path) -> str:
    """/proc/<pid>/maps of the guard's process during an ADD, held while its delegate runs."""
    holder = lab / "bin" / "holder"
    holder.write_text(HOLDING_DELEGATE, encoding="utf-8")
    holder.chmod(0o755)
    started, go = lab / "started", lab / "go"
    env = cni_env("ADD", lab, CNI_NETNS="/var/run/netns/none", STARTED=str(started), GO=str(go))
    guard_exe = link(lab, bundle, "absolute")
    with subprocess.Popen(
        [str(guard_exe)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as proc:
        assert proc.stdin is not None
        proc.stdin.write(lab_conf(lab, "holder"))
        proc.stdin.close()
        try:
            while not started.exists():
                assert proc.poll() is None, "the guard exited before its delegate started"
                time.sleep(0.02)
            maps = Path(f"/proc/{proc.pid}/maps").read_text(encoding="utf-8")
        finally:
            go.touch()
            out = proc.stdout.read() if proc.stdout else b""
            proc.wait(timeout=60)
    assert proc.returncode == 0, out
    internal = bundle.resolve().parent / "_internal"
    assert str(internal) in maps, "not the guard's Python process"
    return maps


@pytest.mark.skipif(os.geteuid() != 0, reason="the guard's stateDir must be owned by root")
def test_ctypes_is_bundled_but_never_loaded(bundle: Path, lab: Path) -> None:
    """ctypes is in the bundle (multiprocessing.sharedctypes brings it), and PyInstaller's own
    bootstrap would load it on every exec (its pyimod03_ctypes hook); the bundle leaves that
    bootstrap out (packaging/rthooks/pyi_rth_delguard_env.py), so ctypes stays out of the process.
    Checked on an ADD, held while its delegate runs, from the guard's own memory map."""
    internal = bundle.resolve().parent / "_internal"
    assert list(internal.glob("python3*/lib-dynload/_ctypes.*.so")), "ctypes no longer bundled"
    maps = held_guard_maps(bundle, lab)
    assert "_ctypes" not in maps
    assert "libffi" not in maps


@pytest.mark.skipif(os.geteuid() != 0, reason="the guard's stateDir must be owned by root")
def test_every_file_the_guard_maps_is_the_bundles_own(bundle: Path, lab: Path) -> None:
    """The loader, the C library and every other file mapped into the running guard come from
    its bundle (packaging/selfcontain.py), none from the host's /lib or /usr/lib: the guard runs
    the same on a host whose C library is older, or absent (tests/node_roots run it there)."""
    folder = bundle.resolve().parent
    maps = held_guard_maps(bundle, lab)
    files = {line.split(maxsplit=5)[5] for line in maps.splitlines()
             if len(line.split(maxsplit=5)) == 6 and line.split(maxsplit=5)[5].startswith("/")}
    assert files, maps
    assert {f for f in files if not f.startswith(f"{folder}/")} == set(), maps
    names = {Path(f).name for f in files}
    assert {"libc.so.6", "libpython3.11.so.1.0"} <= names
    assert any(n.startswith("ld-linux") for n in names), names


def test_the_bundle_is_of_one_arch_and_its_launcher_is_static(bundle: Path) -> None:
    """Every ELF file is of this machine's arch; the executable the runtime runs needs no loader."""
    folder = bundle.resolve().parent
    machine = {"x86_64": "X86-64", "aarch64": "AArch64"}[os.uname().machine]
    for path in folder.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        with path.open("rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
        header = subprocess.run(["readelf", "-h", str(path)], capture_output=True, text=True,
                                check=True).stdout
        assert machine in header, path
    program = subprocess.run(["readelf", "-l", str(bundle.resolve())], capture_output=True,
                             text=True, check=True).stdout
    assert "INTERP" not in program
