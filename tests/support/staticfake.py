"""Build the static fake delegate (tests/fakes/static_delegate/main.go) with Debian's Go.

CGO_ENABLED=0 makes a static executable that needs no C library, so it runs in a node root that
has none. Go's standard library only; no module, nothing downloaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support.guard import HOST_ARCH

SOURCE = Path(__file__).resolve().parents[1] / "fakes" / "static_delegate" / "main.go"


def build(out: Path, goarch: str | None = None) -> Path:
    """Build it to `out` for `goarch` (default: this machine's arch); return `out`."""
    go = shutil.which("go")
    if go is None:
        raise FileNotFoundError("go not found: install golang-go (tools/install-deps.sh test)")
    env = os.environ | {
        "CGO_ENABLED": "0",
        "GO111MODULE": "off",
        "GOARCH": goarch or HOST_ARCH,
        "GOFLAGS": "",
    }
    subprocess.run([go, "build", "-trimpath", "-o", str(out), str(SOURCE)], env=env, check=True,
                   cwd=SOURCE.parent, capture_output=True, timeout=300)
    return out
