"""The installer image run as its DaemonSet pod runs it (podman, runc): the node's / read-only
under /host with the CNI dirs writable over it, a read-only image, few capabilities (SYS_CHROOT to
run the plugin in the node's root). Shared by tests/installer/test_image.py and test_runbooks.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import pytest

# Every test that builds and runs the image: marked `image`, and skipped where it cannot run.
IMAGE_TESTS = [
    pytest.mark.image,
    pytest.mark.skipif(os.geteuid() != 0, reason="buildah and podman need root here"),
    pytest.mark.skipif(
        not all(shutil.which(t) for t in ("buildah", "podman", "debootstrap", "runc")),
        reason="needs buildah, podman, debootstrap and runc",
    ),
]
# The host dirs the DaemonSet mounts writable over the read-only /host (installer/kustomize/base).
WRITABLE = ("opt/cni/bin", "etc/cni/net.d", "var/lib/cni", "var/log/cni-delguard")


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


# What a container may have here: podman's default file limit is above what this machine lets a
# process raise its own to (runc: "error setting rlimit type 7").
LIMITS = ("--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")


def pod_options(node: Any) -> list[str]:
    """`podman run` options that give a container what the DaemonSet's pod has."""
    cmd = [
        *LIMITS,
        "--network",
        "none",
        "--read-only",
        "--cap-drop",
        "ALL",
        "--cap-add",
        "CHOWN,DAC_OVERRIDE,SYS_CHROOT",
        "--volume",
        f"{node.root}:/host:ro",
    ]
    for d in WRITABLE:
        (node.root / d).mkdir(parents=True, exist_ok=True)
        cmd += ["--volume", f"{node.root / d}:/host/{d}"]
    return cmd


def podman_run(
    image: str, node: Any, *args: str, entrypoint: str | None = None, detach: bool = False
) -> subprocess.CompletedProcess[str]:
    """The image run as the DaemonSet runs it, on `node` (a tests/installer Node)."""
    cmd = ["run", "--detach" if detach else "--rm", *pod_options(node)]
    if entrypoint:
        cmd += ["--entrypoint", entrypoint]
    return podman(*cmd, image, *args, timeout=300)
