"""The installer as the kubelet runs it: the DaemonSet's pod template (rendered from the kustomize
overlays by `kubectl kustomize`) as a static pod, with the image tools/build-image.sh builds.

A static pod is the template's pod as it stands, with what a DaemonSet pod gets from its
controller (the name and namespace, the template's labels) and two changes: imagePullPolicy
Never (the node has no registry; the image is imported into its containerd under the
template's own name), and, for a chain without multus, the "--wrap", TYPE the DaemonSet's header
tells users to add to guard another plugin. Nothing else of the template is touched: hostPaths,
the read-only host root, the capabilities and the readiness probe are the ones users deploy.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support import image
from tests.support.guard import HOST_ARCH
from tests.support.kustomize import render
from tests.support.skips import skip_or_fail

if TYPE_CHECKING:
    from tests.e2e_kubelet.site import Site

BUILD_TAG = "localhost/cni-delguard:dgkl"  # build-image.sh names the arch's image <tag>-<arch>
TOOLS = ("buildah", "podman", "debootstrap", "runc")


def static_pod(overlay: str, image: str, wrap: str | None = None) -> dict[str, Any]:
    """The overlay's DaemonSet pod template as a static pod; `image` is checked to be the
    template's own (the node knows it under that name)."""
    ds = render(overlay)
    template = ds["spec"]["template"]
    spec = copy.deepcopy(template["spec"])
    for container in spec["containers"]:
        assert container["image"] == image, (container["image"], image)
        container["imagePullPolicy"] = "Never"
        if wrap is not None:
            container["args"] = [*container["args"], "--wrap", wrap]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": ds["metadata"]["name"],
                         "namespace": ds["metadata"]["namespace"],
                         "labels": dict(template["metadata"]["labels"])},
            "spec": spec}


def template_image() -> str:
    (container,) = render("watch")["spec"]["template"]["spec"]["containers"]
    return str(container["image"])


class ImageArchive:
    """tools/build-image.sh's image for this arch, saved once as an archive for every node that
    imports it (built on first use; removed from podman's store and disk by close())."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dir: Path | None = None
        self._archive: Path | None = None

    def get(self) -> Path:
        with self._lock:
            if self._archive is None:
                self._archive = self._build()
            return self._archive

    def _build(self) -> Path:
        missing = [t for t in TOOLS if shutil.which(t) is None]
        if missing:
            skip_or_fail(f"the installer image needs {', '.join(missing)} "
                         "(tools/test.sh installs them)")
        self._dir = Path(tempfile.mkdtemp(prefix="dgkl-image-"))
        built = image.build(BUILD_TAG, HOST_ARCH)
        return image.save(built[HOST_ARCH], self._dir / "installer.tar")

    def close(self) -> None:
        with self._lock:
            if self._archive is not None:
                image.remove(BUILD_TAG, HOST_ARCH)
            if self._dir is not None:
                shutil.rmtree(self._dir)
            self._archive = self._dir = None


def import_image(site: Site, archive: Path) -> str:
    """Import the installer image into the node's containerd under the template's name."""
    name = template_image()
    site.node.ctr("images", "import", "--snapshotter", site.node.snapshotter, str(archive))
    site.node.ctr("images", "tag", "--force", f"{BUILD_TAG}-{HOST_ARCH}", name)
    return name
