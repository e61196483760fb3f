"""The installer image: built once per caller the one way (tools/build-image.sh, `build`), saved
as an archive a node's runtime imports (`save`), removed again (`remove`); and run as its
DaemonSet pod runs it (podman, runc): the node's / read-only under /host with the CNI dirs
writable over it, a read-only image, few capabilities (SYS_CHROOT to run the plugin in the node's
root). Shared by tests/installer's image and runbook tests and the kubelet and cluster suites.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
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
REPO = Path(__file__).resolve().parents[2]
BUILD_BOUND = 1800  # s: a cold build (debootstrap, two arches under qemu-user) at load 50


def build(tag: str, *arches: str, tree: Path = REPO, sbom_dir: Path | None = None,
          timeout: float = BUILD_BOUND) -> dict[str, str]:
    """tools/build-image.sh of `tree`: the manifest list `tag`, one image `<tag>-<arch>` per
    arch; returns {arch: image name}. Its output (build times, sizes) goes to the test's log."""
    env = dict(os.environ, IMAGE=tag)
    if sbom_dir is not None:
        env["SBOM_DIR"] = str(sbom_dir)
    built = subprocess.run(["bash", str(tree / "tools" / "build-image.sh"), *arches], env=env,
                           capture_output=True, text=True, timeout=timeout, check=False)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-4000:]
    print(built.stdout)
    return {arch: f"{tag}-{arch}" for arch in arches}


def save(name: str, archive: Path) -> Path:
    """The image as a docker archive, which `ctr images import` and `podman load` take."""
    subprocess.run(["podman", "save", "--format", "docker-archive", "-o", str(archive), name],
                   check=True, capture_output=True, timeout=600)
    return archive


def remove(tag: str, *arches: str) -> None:
    """The manifest list and its images, best effort (a failed build may have made none)."""
    subprocess.run(["buildah", "manifest", "rm", tag], capture_output=True, check=False,
                   timeout=120)
    for arch in arches:
        subprocess.run(["podman", "rmi", "--force", f"{tag}-{arch}"], capture_output=True,
                       check=False, timeout=120)


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
