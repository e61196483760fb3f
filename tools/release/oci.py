"""The installer image as an OCI image layout, written here rather than by a builder, so that
its bytes depend on the bundle and the release's inputs only: one layer per arch (the bundle at
/usr/lib/cni-delguard, its SBOM, an empty /tmp: what the Dockerfile's final stage holds), its
config, its manifest, and one image index naming both arches; packed as an OCI archive (a tar
of the layout, as `skopeo copy oci-archive:` and `buildah`/`podman` read it). The image's
digest is the index's: what a node pulls by, what cosign signs.

Nothing runs in the image while it is made (the bundle was built and smoke-tested in its own
arch's root by tools/build.sh), so the arm64 image needs no emulation here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tools.release.reprotar import Entry, gzipped, tar_bytes, tree

INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
BIN_DIR = "usr/lib/cni-delguard"
SBOM_PATH = "usr/share/doc/cni-delguard/sbom.cdx.json"
# The Dockerfile's final stage says the same (ENV, ENTRYPOINT, CMD); its header says why.
RUNTIME_CONFIG: dict[str, Any] = {
    "Env": [f"PATH=/{BIN_DIR}"],
    "Entrypoint": [f"/{BIN_DIR}/cni-delguard"],
    "Cmd": ["install", "--watch", "--root", "/host"],
}
# The platform of each arch, as the OCI image spec's platform object names it (variant v8:
# what containerd's platform matcher expects of arm64).
PLATFORMS: dict[str, dict[str, str]] = {
    "amd64": {"architecture": "amd64", "os": "linux"},
    "arm64": {"architecture": "arm64", "os": "linux", "variant": "v8"},
}


@dataclass(frozen=True)
class Release:
    """What every arch's image shares: the version, the commit, the source's home, the time."""

    version: str
    revision: str
    source: str
    epoch: int

    @property
    def created(self) -> str:
        return datetime.fromtimestamp(self.epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def annotations(self) -> dict[str, str]:
        return {
            "org.opencontainers.image.created": self.created,
            "org.opencontainers.image.revision": self.revision,
            "org.opencontainers.image.source": self.source,
            "org.opencontainers.image.title": "cni-delguard",
            "org.opencontainers.image.version": self.version,
        }


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def descriptor(media_type: str, data: bytes, **more: Any) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": digest(data), "size": len(data), **more}


def rootfs(bundle: Path, sbom: bytes) -> list[Entry]:
    """The final image's filesystem (installer/stage-rootfs.sh lays out the same for the
    Dockerfile): the bundle, its SBOM, an empty sticky /tmp."""
    return [
        Entry("usr", 0o755), Entry("usr/lib", 0o755), Entry("usr/share", 0o755),
        Entry("usr/share/doc", 0o755), Entry("usr/share/doc/cni-delguard", 0o755),
        Entry(SBOM_PATH, 0o644, data=sbom), Entry("tmp", 0o1777),
        *tree(bundle, BIN_DIR),
    ]


def image(arch: str, layer_tar: bytes, release: Release, blobs: dict[str, bytes]) -> bytes:
    """One arch's manifest (its blobs added to `blobs`)."""
    layer = gzipped(layer_tar)
    config = canonical({
        "architecture": PLATFORMS[arch]["architecture"],
        "os": "linux",
        **({"variant": PLATFORMS[arch]["variant"]} if "variant" in PLATFORMS[arch] else {}),
        "created": release.created,
        "config": {**RUNTIME_CONFIG, "Labels": release.annotations()},
        "rootfs": {"type": "layers", "diff_ids": [digest(layer_tar)]},
        "history": [{"created": release.created, "created_by": "tools/release.sh"}],
    })
    manifest = canonical({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": descriptor(CONFIG, config),
        "layers": [descriptor(LAYER, layer)],
        "annotations": release.annotations(),
    })
    for blob in (layer, config, manifest):
        blobs[digest(blob)] = blob
    return manifest


def index(layers: Mapping[str, bytes], release: Release) -> tuple[str, dict[str, bytes]]:
    """The image index of every arch's image (arch -> its layer's uncompressed tar): its digest
    and every blob by digest."""
    blobs: dict[str, bytes] = {}
    manifests = [descriptor(MANIFEST, image(arch, layers[arch], release, blobs),
                            platform=PLATFORMS[arch]) for arch in sorted(layers)]
    top = canonical({"schemaVersion": 2, "mediaType": INDEX, "manifests": manifests,
                     "annotations": release.annotations()})
    blobs[digest(top)] = top
    return digest(top), blobs


def archive(index_digest: str, blobs: Mapping[str, bytes], release: Release) -> bytes:
    """The OCI layout as a tar: oci-layout, index.json naming the image index by the version (the
    reference `oci-archive:FILE:VERSION`), blobs/sha256/*."""
    top = blobs[index_digest]
    layout_index = canonical({
        "schemaVersion": 2,
        "manifests": [descriptor(INDEX, top, annotations={
            "org.opencontainers.image.ref.name": release.version})],
    })
    entries = [
        Entry("oci-layout", 0o644, data=canonical({"imageLayoutVersion": "1.0.0"})),
        Entry("index.json", 0o644, data=layout_index),
        Entry("blobs", 0o755), Entry("blobs/sha256", 0o755),
        *(Entry(f"blobs/sha256/{d.removeprefix('sha256:')}", 0o644, data=b)
          for d, b in blobs.items()),
    ]
    return tar_bytes(entries, release.epoch)
