"""The installer's kustomize overlays as `kubectl kustomize` renders them, offline.

kubectl is Debian's (trixie), unpacked under .cache/ by tools/unpack-deb.sh (tools/test.sh runs
it; KUBECTL overrides). Used by the manifest tests and by the kubelet suite, which runs the
DaemonSet's pod template as a static pod.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
KUSTOMIZE = REPO / "installer" / "kustomize"


def kubectl() -> str:
    found = os.environ.get("KUBECTL") or str(REPO / ".cache/kubectl/usr/bin/kubectl")
    if not os.access(found, os.X_OK):
        pytest.skip("no Debian kubectl: run tools/unpack-deb.sh kubectl/trixie usr/bin/kubectl "
                    "(tools/test.sh does)")
    return found


def render_all(overlay: str) -> list[dict[str, Any]]:
    return render_dir(KUSTOMIZE / "overlays" / overlay)


def render_dir(directory: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize` of any kustomization dir (a test's own overlay)."""
    r = subprocess.run(
        [kubectl(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d is not None]


def render(overlay: str) -> dict[str, Any]:
    """The overlay's DaemonSet (the monitoring overlay adds other kinds)."""
    (doc,) = [d for d in render_all(overlay) if d["kind"] == "DaemonSet"]
    return doc
