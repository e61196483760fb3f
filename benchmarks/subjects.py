"""The programs under comparison and the inputs they get."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FROZEN = REPO / "dist" / "cni-delguard" / "cni-delguard"
CNI_LIB = Path("/usr/lib/cni")
LOOPBACK = CNI_LIB / "loopback"
# Debian's python3.11: one static executable, built with PGO and LTO (the interpreter floor the
# skip path is held against), and the headers of the version the bundle carries (pyfloor.c).
DEBIAN_PYTHON = Path("/usr/bin/python3.11")
PYTHON_INCLUDE = Path("/usr/include/python3.11")
PYFLOOR_SOURCE = Path(__file__).with_name("pyfloor.c")

FLOOR_SOURCE = """\
#include <unistd.h>
int main(void) {
    char buf[4096];
    while (read(0, buf, sizeof buf) > 0) {
    }
    return 0;
}
"""


def require_executable(path: Path, hint: str) -> Path:
    if not os.access(path, os.X_OK):
        raise SystemExit(f"benchmarks: {path} is not an executable: {hint}")
    return path


def build_floor(scratch: Path) -> Path:
    """The static floor: a static C program that reads stdin to EOF and exits 0."""
    if shutil.which("gcc") is None:
        raise SystemExit("benchmarks: gcc is needed for the static floor (apt-get install gcc)")
    src = scratch / "floor.c"
    exe = scratch / "floor"
    src.write_text(FLOOR_SOURCE, encoding="utf-8")
    subprocess.run(["gcc", "-static", "-O2", "-o", str(exe), str(src)], check=True)
    return exe


def build_pyfloor(scratch: Path, bundle: Path) -> tuple[str, ...]:
    """The argv that starts the bundle's own interpreter bare (benchmarks/pyfloor.c), through the
    bundle's loader as the launcher starts the guard."""
    internal = bundle.resolve().parent / "_internal"
    (loader,) = internal.glob("ld-linux-*.so.*")
    if not (PYTHON_INCLUDE / "Python.h").is_file():
        raise SystemExit("benchmarks: no Python.h for pyfloor.c: apt-get install libpython3.11-dev")
    exe = scratch / "pyfloor"
    subprocess.run(["gcc", "-O2", f"-I{PYTHON_INCLUDE}", "-o", str(exe), str(PYFLOOR_SOURCE),
                    str(internal / "libpython3.11.so.1.0")], check=True)
    return (str(loader), "--inhibit-cache", "--library-path", str(internal), str(exe),
            str(internal))


_SETTINGS: list[str] = []


def settings_dir() -> str:
    """A dir holding only the admin's `cni-delguard.paths`, allowing state and logs under the
    temp dir where the benchmarks keep them (the guard's built-in places do not include it:
    cni_delguard/guard/paths.py); first in every CNI_PATH given. Removed at exit."""
    if not _SETTINGS:
        path = Path(tempfile.mkdtemp(prefix="dgbench-paths-"))
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        temp = os.path.realpath(tempfile.gettempdir())
        (path / "cni-delguard.paths").write_text(f"state {temp}\nlog {temp}\n")
        (path / "cni-delguard.paths").chmod(0o644)
        _SETTINGS.append(str(path))
    return _SETTINGS[0]


def cni_env(command: str, container_id: str, cni_path: str, netns: str = "") -> dict[str, str]:
    """The environment a runtime gives a plugin (PATH kept so delegates find their tools), with
    settings_dir() first in CNI_PATH."""
    env = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": container_id,
        "CNI_IFNAME": "eth0",
        "CNI_PATH": f"{settings_dir()}:{cni_path}",
        "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
    }
    if netns:
        env["CNI_NETNS"] = netns
    return env


def guard_state(root: Path) -> dict[str, Any]:
    """Guard keys that keep all its state under root (DESIGN.md, "Guard keys")."""
    for sub in ("state", "results", "multus"):
        (root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    return {
        "stateDir": str(root / "state"),
        "logFile": str(root / "log"),
        "resultCacheDirs": [str(root / "results")],
        "multusCacheDirs": [str(root / "multus")],
    }


def guard_conf(name: str, delegate: dict[str, Any], state: dict[str, Any]) -> bytes:
    conf = {"cniVersion": "1.0.0", "name": name, "type": "cni-delguard", "delegate": delegate}
    conf.update(state)
    return json.dumps(conf).encode()


def plugin_conf(name: str, plugin: dict[str, Any]) -> bytes:
    return json.dumps({"cniVersion": "1.0.0", "name": name, **plugin}).encode()


def container_id(prefix: str, number: int) -> str:
    return f"{prefix}-{number & 0xFFFFFFFF:08x}"
