"""A pause image made here: a static C program that waits in pause(), packed as an OCI archive.

No registry is reachable, so the sandbox image is built locally: gcc -static compiles a few lines
of C, and this module packs the binary as a one-layer OCI image layout tarball (oci-layout,
index.json, blobs/sha256/...) that `ctr images import` accepts. Everything is deterministic
(fixed mtimes, sorted entries), so the same compiler output gives the same image digest.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

from tests.support.guard import HOST_ARCH

IMAGE_REF = "localhost/delguard-e2e/pause:1"

PAUSE_C = r"""
#include <signal.h>
#include <unistd.h>

static void bye(int sig) { (void)sig; _exit(0); }

int main(void) {
    signal(SIGTERM, bye);
    signal(SIGINT, bye);
    for (;;) pause();
}
"""



def compile_pause(work: Path) -> Path:
    source = work / "pause.c"
    source.write_text(PAUSE_C, encoding="utf-8")
    binary = work / "pause"
    subprocess.run(["gcc", "-static", "-Os", "-s", "-o", str(binary), str(source)], check=True)
    return binary


def _tar_bytes(members: dict[str, tuple[bytes, int]]) -> bytes:
    """An uncompressed tar of name -> (content, mode), deterministic."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            data, mode = members[name]
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _descriptor(media_type: str, blob: bytes) -> dict[str, object]:
    return {
        "mediaType": media_type,
        "digest": "sha256:" + hashlib.sha256(blob).hexdigest(),
        "size": len(blob),
    }


def _canonical(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def oci_archive(pause_binary: bytes, ref: str = IMAGE_REF) -> bytes:
    """The OCI image layout tarball holding one image: /pause as its entrypoint."""
    layer = _tar_bytes({"pause": (pause_binary, 0o755)})
    config = _canonical({
        "architecture": HOST_ARCH,
        "os": "linux",
        "config": {"Entrypoint": ["/pause"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]},
    })
    manifest = _canonical({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": _descriptor("application/vnd.oci.image.config.v1+json", config),
        "layers": [_descriptor("application/vnd.oci.image.layer.v1.tar", layer)],
    })
    entry = _descriptor("application/vnd.oci.image.manifest.v1+json", manifest)
    entry["platform"] = {"architecture": HOST_ARCH, "os": "linux"}
    entry["annotations"] = {
        "io.containerd.image.name": ref,
        "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[1],
    }
    index = _canonical({"schemaVersion": 2, "manifests": [entry]})
    members = {
        "oci-layout": (_canonical({"imageLayoutVersion": "1.0.0"}), 0o644),
        "index.json": (index, 0o644),
    }
    for blob in (layer, config, manifest):
        members[f"blobs/sha256/{hashlib.sha256(blob).hexdigest()}"] = (blob, 0o644)
    return _tar_bytes(members)


def build(work: Path, ref: str = IMAGE_REF) -> Path:
    """Compile the pause program in work and write work/pause-image.tar; return its path."""
    work.mkdir(parents=True, exist_ok=True)
    archive = work / "pause-image.tar"
    archive.write_bytes(oci_archive(compile_pause(work).read_bytes(), ref))
    return archive
