"""tools/release/oci.py: the multi-arch OCI image written from the bundles, checked as a
registry and a runtime read it: the layout's index names the image index by the version, every
descriptor's digest and size match its blob, each arch's platform, config and filesystem."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile

import pytest

from tools.release import oci, reprotar

RELEASE = oci.Release("1.2.3", "a" * 40, "https://example.invalid/cni-delguard", 1_700_000_000)


@pytest.fixture
def bundles(tmp_path):
    found = {}
    for arch in ("amd64", "arm64"):
        b = tmp_path / arch / "cni-delguard"
        (b / "_internal").mkdir(parents=True)
        (b / "cni-delguard").write_bytes(f"launcher {arch}".encode())
        (b / "cni-delguard").chmod(0o755)
        found[arch] = b
    return found


def build(bundles, release=RELEASE):
    layers = {arch: reprotar.tar_bytes(oci.rootfs(b, f"sbom {arch}".encode()), release.epoch)
              for arch, b in bundles.items()}
    digest, blobs = oci.index(layers, release)
    return digest, oci.archive(digest, blobs, release)


def layout(archive: bytes) -> dict[str, bytes]:
    return {m.name: m.data for m in reprotar.members(archive) if m.data is not None}


def blob(files, descriptor) -> bytes:
    data = files["blobs/sha256/" + descriptor["digest"].removeprefix("sha256:")]
    assert len(data) == descriptor["size"]
    assert "sha256:" + hashlib.sha256(data).hexdigest() == descriptor["digest"]
    return data


def test_the_layout_names_one_image_index_for_both_arches(bundles):
    digest, archive = build(bundles)
    files = layout(archive)
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    (top,) = json.loads(files["index.json"])["manifests"]
    assert top["annotations"] == {"org.opencontainers.image.ref.name": "1.2.3"}
    assert top["mediaType"] == oci.INDEX and top["digest"] == digest
    index = json.loads(blob(files, top))
    assert index["annotations"]["org.opencontainers.image.revision"] == "a" * 40
    assert [m["platform"] for m in index["manifests"]] == [
        {"architecture": "amd64", "os": "linux"},
        {"architecture": "arm64", "os": "linux", "variant": "v8"}]


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_each_arch_image_runs_its_own_bundle_as_the_dockerfile_says(bundles, arch):
    _, archive = build(bundles)
    files = layout(archive)
    index = json.loads(blob(files, json.loads(files["index.json"])["manifests"][0]))
    (entry,) = [m for m in index["manifests"] if m["platform"]["architecture"] == arch]
    manifest = json.loads(blob(files, entry))
    config = json.loads(blob(files, manifest["config"]))
    assert config["architecture"] == arch and config["os"] == "linux"
    assert config["config"]["Entrypoint"] == ["/usr/lib/cni-delguard/cni-delguard"]
    assert config["config"]["Cmd"] == ["install", "--watch", "--root", "/host"]
    (layer,) = manifest["layers"]
    raw = reprotar.members(blob(files, layer))
    diff_id = hashlib.sha256(gzip.decompress(blob(files, layer))).hexdigest()
    assert config["rootfs"]["diff_ids"] == [f"sha256:{diff_id}"]
    by_name = {m.name: m for m in raw}
    assert by_name["usr/lib/cni-delguard/cni-delguard"].data == f"launcher {arch}".encode()
    assert by_name["usr/lib/cni-delguard/cni-delguard"].mode == 0o755
    assert by_name[oci.SBOM_PATH].data == f"sbom {arch}".encode()
    assert by_name["tmp"].mode == 0o1777


def test_the_same_inputs_give_the_same_digest_and_bytes_and_a_change_another(bundles):
    first, again = build(bundles), build(bundles)
    assert first == again
    (bundles["arm64"] / "_internal" / "new").write_bytes(b"x")
    assert build(bundles)[0] != first[0]
    later = oci.Release(RELEASE.version, RELEASE.revision, RELEASE.source, RELEASE.epoch + 1)
    assert build(bundles, later)[0] != build(bundles)[0]


def test_the_archive_is_a_plain_tar_every_entry_owned_by_root_at_the_commit_time(bundles):
    _, archive = build(bundles)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        assert {(i.uid, i.gid, i.mtime) for i in tar} == {(0, 0, RELEASE.epoch)}
