"""The container image (Dockerfile, tools/build-image.sh): its commands on a temp node root, run
as the DaemonSet runs them (read-only, few capabilities, the host dirs under /host). Built for
amd64 and arm64 with one manifest list naming both; the arm64 variant runs here under qemu-user
(its build stage ran the installer's own smoke test under emulation too).

Marked `image` (select with -m image, leave out with -m "not image"): it builds the image with
buildah from a debootstrap base, a few minutes the first time. Skipped without root, buildah,
podman or debootstrap (tools/install-deps.sh test).
"""

from __future__ import annotations

import json
import os
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from cni_delguard.node import bundle
from tests.support.guard import HOST_ARCH
from tests.support.image import IMAGE_TESTS, podman, podman_run
from tests.support.waiting import wait_for

from .conftest import MULTUS_CONF

REPO = Path(__file__).resolve().parents[2]
LIST = "localhost/cni-delguard:image-test"  # the manifest list; each arch's image is LIST-<arch>
ARCHES = ("amd64", "arm64")
IMAGE = f"{LIST}-{HOST_ARCH}"
BASE = "localhost/cni-delguard-base:bookworm"  # tools/build-image.sh's BASE_IMAGE; BASE-<arch>
ENTRY = "/usr/lib/cni-delguard/cni-delguard"
MAX_SIZE_MIB = 64

pytestmark = IMAGE_TESTS


@pytest.fixture(scope="module")
def sbom_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("sbom")


@pytest.fixture(scope="module")
def images(sbom_dir):
    env = dict(os.environ, IMAGE=LIST, SBOM_DIR=str(sbom_dir))
    r = subprocess.run(
        ["bash", str(REPO / "tools" / "build-image.sh"), *ARCHES],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    print(r.stdout)  # build times and sizes, for the test log
    yield {arch: f"{LIST}-{arch}" for arch in ARCHES}
    subprocess.run(["podman", "manifest", "rm", LIST], capture_output=True, check=False)
    for arch in ARCHES:
        subprocess.run(["podman", "rmi", "--force", f"{LIST}-{arch}"], capture_output=True,
                       check=False)


@pytest.fixture(scope="module")
def image(images):
    """This machine's arch."""
    return images[HOST_ARCH]


def test_one_manifest_list_names_an_image_for_each_arch(images):
    r = subprocess.run(["podman", "manifest", "inspect", LIST], capture_output=True, text=True,
                       check=True)
    platforms = sorted((m["platform"]["os"], m["platform"]["architecture"])
                       for m in json.loads(r.stdout)["manifests"])
    assert platforms == [("linux", "amd64"), ("linux", "arm64")]
    for arch, name in images.items():
        r = subprocess.run(["podman", "image", "inspect", name], capture_output=True, text=True,
                           check=True)
        assert json.loads(r.stdout)[0]["Architecture"] == arch


def test_image_is_small_and_runs_the_watching_installer_by_default(image):
    r = subprocess.run(
        ["podman", "image", "inspect", image], capture_output=True, text=True, check=True
    )
    (info,) = json.loads(r.stdout)
    assert info["Config"]["Entrypoint"] == [ENTRY]
    assert info["Config"]["Cmd"] == ["install", "--watch", "--root", "/host"]
    assert info["Size"] < MAX_SIZE_MIB << 20


@pytest.mark.parametrize("arch", ARCHES)
def test_entrypoint_installs_on_a_node_root_and_uninstall_restores_it(images, node, arch):
    """Each arch's image, as its DaemonSet pod would run it (arm64 here under qemu-user): the
    bundle it installs names its arch, runs with the node's root as /, and goes again."""
    image = images[arch]
    path = node.write_conf("00-multus.conf", MULTUS_CONF, mode=0o600)
    r = podman_run(image, node, "install", "--root", "/host")
    assert r.returncode == 0, r.stderr
    assert f"({arch}, verified complete, runs on the node)" in r.stderr
    assert json.loads(path.read_text())["type"] == "cni-delguard"
    assert path.stat().st_mode & 0o777 == 0o600
    (manifest,) = node.bin.glob(".cni-delguard-*/.delguard-manifest.json")
    assert json.loads(manifest.read_text())["arch"] == arch
    v = subprocess.run(
        [node.bin / "cni-delguard"],
        env={"CNI_COMMAND": "VERSION"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    assert v.returncode == 0, v.stderr
    assert "supportedVersions" in v.stdout
    again = podman_run(image, node, "install", "--root", "/host")
    assert again.returncode == 0
    assert "unchanged" in again.stderr and "up to date" in again.stderr
    r = podman_run(image, node, "uninstall", "--root", "/host")
    assert r.returncode == 0, r.stderr
    assert path.read_text() == MULTUS_CONF
    assert os.listdir(node.bin) == []


def test_entrypoint_dry_run_prints_the_diff_and_a_refusal_is_one_line(image, node):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    r = podman_run(image, node, "install", "--root", "/host", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("--- a/host/etc/cni/net.d/00-multus.conf\n")
    assert path.read_text() == MULTUS_CONF
    assert os.listdir(node.bin) == []
    r = podman_run(image, node, "install", "--root", "/host", "--wrap", "calico")
    assert r.returncode == 3
    assert r.stderr.count("\n") == 1
    assert "not 'calico'" in r.stderr


def wrapped(path):
    try:
        return json.loads(path.read_text()).get("type") == "cni-delguard"
    except (OSError, ValueError):
        return False


def test_default_command_keeps_the_node_guarded_and_its_probe_follows(image, node):
    """The DaemonSet's container: the image's default command, its readiness probe by exec."""
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    r = podman_run(image, node, detach=True)
    assert r.returncode == 0, r.stderr
    cid = r.stdout.strip()
    try:
        probe = ("exec", cid, ENTRY, "ready", "--root", "/host")
        wait_for(
            lambda: podman(*probe).returncode == 0,
            "the probe to answer 0",
            60.0,
            every=0.2,
            detail=lambda: podman("logs", cid).stdout,
        )
        tmp = node.net / ".multus.tmp"  # multus restarts and rewrites its conf
        tmp.write_text(MULTUS_CONF.replace("kube-ovn", "calico"))
        os.rename(tmp, path)
        wait_for(
            lambda: wrapped(path),
            "the conf wrapped",
            60.0,
            every=0.2,
            detail=lambda: podman("logs", cid).stdout,
        )
        wait_for(lambda: podman(*probe).returncode == 0, "the probe to answer 0", 60.0, every=0.2)
        assert json.loads(path.read_text())["delegate"]["delegates"][0]["name"] == "calico"
        r = podman_run(image, node, "uninstall", "--root", "/host")  # while the watcher runs
        assert r.returncode == 0, r.stderr
        assert path.read_text() == MULTUS_CONF.replace("kube-ovn", "calico")
        wait_for(
            lambda: "uninstalled at" in podman("logs", cid).stdout,
            "the container to honour the uninstall record",
            60.0,
            every=0.2,
        )
        assert podman(*probe).returncode == 13
        logs = podman("logs", cid).stdout
        assert logs.count("wrapped 'multus'") == 2, logs
    finally:
        podman("stop", "--time", "10", cid)
        podman("rm", "--force", cid)
    assert path.read_text() == MULTUS_CONF.replace("kube-ovn", "calico")
    assert os.listdir(node.bin) == []


def test_two_containers_installing_at_once_leave_one_complete_bundle(image, node):
    """Two installer containers on one node (a surge, two DaemonSets): both are PID 1."""
    node.write_conf("00-multus.conf", MULTUS_CONF)
    ids = []
    for _ in range(2):
        r = podman_run(image, node, "install", "--root", "/host", detach=True)
        assert r.returncode == 0, r.stderr
        ids.append(r.stdout.strip())
    try:
        codes = [podman("wait", cid).stdout.strip() for cid in ids]
        logs = [podman("logs", cid).stderr for cid in ids]
    finally:
        podman("rm", "--force", *ids)
    assert codes == ["0", "0"], logs
    versions = [n for n in os.listdir(node.bin) if n.startswith(".cni-delguard-")]
    assert len(versions) == 1
    assert not [n for n in os.listdir(node.bin) if n.endswith(".tmp")]
    assert sum("wrapped 'multus'" in log for log in logs) == 1, logs
    assert bundle.check(str(node.bin), deep=True) is None


def _copy_out(image: str, path: str, dest: Path) -> Path:
    """`path` of `image`'s filesystem copied to `dest` (a container created, never started: the
    command given is only there because the imported base image has none)."""
    created = podman("create", image, "never-run")
    assert created.returncode == 0, created.stderr
    ctr = created.stdout.strip()
    try:
        out = podman("cp", f"{ctr}:{path}", str(dest))
    finally:
        podman("rm", "--force", ctr)
    assert out.returncode == 0, out.stderr
    return dest


def _installed(status: Path) -> set[tuple[str, str]]:
    """(package, version) of every package a dpkg status file has installed, as dpkg reads it."""
    listed = subprocess.run(
        ["dpkg-query", f"--admindir={status.parent}", "-W",
         "-f", "${Package} ${Version} ${db:Status-Status}\n"],
        capture_output=True, text=True, check=True, timeout=60).stdout.splitlines()
    return {(line.split()[0], line.split()[1]) for line in listed if line.endswith(" installed")}


def test_the_image_build_writes_one_sbom_of_the_base_and_the_bundle(images, sbom_dir, tmp_path):
    """tools/build-image.sh writes a CycloneDX SBOM per arch by the release's own code
    (tools/release/sbom.py) and the image carries the same file. It lists every Debian package
    the base's dpkg status has installed (the build stage runs on the base, which holds the
    bundle's loader, glibc and libpython), and every Python distribution frozen into the image's
    bundle, at their versions, and nothing else."""
    version = REPO.joinpath("pyproject.toml").read_text().split('version = "', 1)[1].split('"')[0]
    for arch, image in images.items():
        path = sbom_dir / f"cni-delguard-{version}-{arch}.cdx.json"
        assert path.is_file(), sorted(os.listdir(sbom_dir))
        bom = json.loads(path.read_text())
        assert bom["bomFormat"] == "CycloneDX"
        assert bom["metadata"]["component"]["name"] == "cni-delguard"

        def of(kind: str, bom: dict[str, Any] = bom) -> set[tuple[str, str]]:
            return {(c["name"], c["version"]) for c in bom["components"]
                    if c["purl"].startswith(f"pkg:{kind}/")}

        debs, pypi = of("deb"), of("pypi")
        assert len(debs) + len(pypi) == len(bom["components"])
        assert {c["purl"].rsplit("arch=", 1)[1].split("&")[0] for c in bom["components"]
                if c["purl"].startswith("pkg:deb/")} <= {arch, "all"}
        here = tmp_path / arch
        (here / "dpkg").mkdir(parents=True)
        status = _copy_out(f"{BASE}-{arch}", "/var/lib/dpkg/status", here / "dpkg" / "status")
        assert debs == _installed(status)
        assert {"libc6", "libpython3.11", "python3.11"} <= {name for name, _ in debs}
        frozen = _copy_out(image, "/usr/lib/cni-delguard", here / "bundle")
        assert pypi == {(d.metadata["Name"], d.version) for d in
                        metadata.distributions(path=[str(frozen / "_internal")])}
        assert "pydantic" in {name for name, _ in pypi}
        inside = _copy_out(image, "/usr/share/doc/cni-delguard/sbom.cdx.json", here / "in.json")
        assert inside.read_bytes() == path.read_bytes()
