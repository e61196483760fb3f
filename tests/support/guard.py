"""Which guard the tests run, and how it is put into a CNI bin dir.

The frozen binary is the product, so it is the default: dist/cni-delguard/cni-delguard, reached
through a symlink named cni-delguard in the test's bin dir (how it sits in /opt/cni/bin).

DELGUARD_UNDER_TEST=package runs the package instead (quick runs while developing): the bin dir
gets a small launcher that execs this interpreter on cni_delguard, with no shell in between.
DELGUARD_BIN=/path/to/cni-delguard points at another frozen build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FROZEN = REPO / "dist" / "cni-delguard" / "cni-delguard"
# Go's and Kubernetes' names of the machines the bundle is built for: the tests' own table, not
# the product's (buildinfo.ARCHES), so that a wrong name there is caught rather than copied.
GOARCH = {"x86_64": "amd64", "aarch64": "arm64"}
HOST_ARCH = GOARCH.get(os.uname().machine, os.uname().machine)


def under_test() -> str:
    """'frozen' or 'package'."""
    mode = os.environ.get("DELGUARD_UNDER_TEST", "frozen")
    if mode not in ("frozen", "package"):
        raise ValueError(f"DELGUARD_UNDER_TEST must be 'frozen' or 'package', not {mode!r}")
    return mode


def frozen_binary() -> Path:
    path = Path(os.environ.get("DELGUARD_BIN", str(FROZEN)))
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(
            f"frozen guard not found at {path}: build it with tools/build.sh, "
            "or set DELGUARD_UNDER_TEST=package"
        )
    return path


def frozen_or_skip() -> Path:
    """The frozen binary, for a test that needs it; skipped when it is not built (the fast loop
    needs no build), but a failure under CI, where tools/build.sh has run."""
    from tests.support.skips import skip_or_fail

    try:
        return frozen_binary()
    except FileNotFoundError as exc:
        skip_or_fail(str(exc))


def frozen_or_skip_for(arch: str) -> Path:
    """Another arch's frozen bundle (tools/build.sh --arch ARCH: dist/ARCH/cni-delguard/), run
    here under qemu-user; skipped when it is not built, a failure under CI (tools/test.sh builds
    it)."""
    from tests.support.skips import skip_or_fail

    if arch == HOST_ARCH:
        return frozen_or_skip()
    path = REPO / "dist" / arch / "cni-delguard" / "cni-delguard"
    if not os.access(path, os.X_OK):
        skip_or_fail(f"no {arch} bundle at {path}: build it with tools/build.sh --arch {arch}")
    return path


def install_guard(bin_dir: Path, name: str = "cni-delguard") -> Path:
    """Make bin_dir/name run the guard under test; return that path. Beside it, the admin's
    settings file that allows state and logs under the temp dir, where the tests keep them
    (tests/support/paths.py)."""
    from tests.support.paths import widen

    widen(bin_dir)
    target = bin_dir / name
    if under_test() == "frozen":
        target.symlink_to(frozen_binary())
    else:
        target.write_text(
            f"#!{sys.executable} -I\n"
            "import sys\n"
            f"sys.path.insert(0, {str(REPO)!r})\n"
            "from cni_delguard.cli import run\n"
            "run()\n",
            encoding="utf-8",
        )
        target.chmod(0o755)
    return target


def guard_argv() -> list[str]:
    """The command line that runs the guard under test directly (not through a bin dir)."""
    if under_test() == "frozen":
        return [str(frozen_binary())]
    return [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(REPO)!r}); "
            "from cni_delguard.cli import run; run()"]


def exec_cni(
    bin_dir: Path,
    command: str,
    conf: bytes | dict[str, Any],
    cid: str = "c1",
    ifname: str = "eth0",
    netns_path: str = "/proc/self/ns/net",
    prefix: tuple[str, ...] = (),
    cni_args: str | None = None,
) -> tuple[int, Any]:
    """Exec bin_dir/cni-delguard as a runtime would (a small fixed environment, the CNI_*
    variables, the config on stdin): (exit code, stdout parsed as JSON or None). Never a
    traceback on stderr."""
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": cid,
        "CNI_IFNAME": ifname,
        "CNI_NETNS": netns_path,
        "CNI_PATH": str(bin_dir),
    }
    if cni_args is not None:
        env["CNI_ARGS"] = cni_args
    data = conf if isinstance(conf, bytes) else json.dumps(conf).encode()
    proc = subprocess.run(
        [*prefix, str(bin_dir / "cni-delguard")],
        input=data,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert b"Traceback" not in proc.stderr, proc.stderr.decode()
    return proc.returncode, (json.loads(proc.stdout) if proc.stdout else None)


def tool(bin_dir: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run bin_dir/cni-delguard as the operator's tool (`list`, `doctor`, `release` ...), with a
    small fixed environment: its exit code and text output. Never a traceback on stderr."""
    proc = subprocess.run(
        [str(bin_dir / "cni-delguard"), *argv],
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc
