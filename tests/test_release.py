"""tools/release.sh, run as a releaser runs it, on two clean clones of HEAD (amd64 only: the
arm64 image is assembled by the same code from the arm64 bundle; `tools/release.sh
--check-reproducible` builds both arches afresh).

- Reproducible: the two releases hold the same bytes, the image digest, the chart and SHA256SUMS
  among them; a mismatch names the first differing file (inside tarballs: `x.oci.tar!blobs/...`).
  One is signed with a key made for the test, one is not: signing changes nothing else.
  Each clone's bundle comes from tools/build.sh's cache when this commit's inputs were built
  before (tools/test.sh builds them first): that a bundle built again is the same bytes is
  tests/test_build_from_archive.py's (a checkout's bundle and a tarball's, built afresh).
- The SBOM against what it describes: the build root's dpkg database (read by dpkg-query) and the
  distributions whose metadata the bundle carries (read by importlib.metadata).
- Standard tools read the artifacts: skopeo the OCI archive, helm the chart (its default image is
  the release's, by digest), cosign the signatures; a tampered chart fails cosign verify-blob.
- Refused: a tree with changes, and no home (no address is invented).

Marked `build` (tools/build.sh, root, the build root); the pinned helm (peers/pins.tsv), cosign
(tools/unpack-deb.sh cosign/trixie) and skopeo (Debian's) are needed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from cni_delguard import __version__
from cni_delguard.node import bundle
from tests.support import cosign, peers, registry
from tests.support.guard import REPO
from tests.support.noderoot import needs_root
from tools.release import reprotar

pytestmark = pytest.mark.build

HOME_URL = "https://example.invalid/cni-delguard"  # .invalid (RFC 2606): the test's own home
HOME_IMAGE = "registry.example.invalid/cni-delguard"
NAME = f"cni-delguard-{__version__}"
UNSIGNED = ("SHA256SUMS.sig", f"{NAME}.tgz.sig", "cosign.pub")


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          timeout=300).stdout.strip()


def clone(dest: Path) -> Path:
    git("clone", "--quiet", "--no-checkout", "--shared", str(REPO), str(dest))
    git("checkout", "--quiet", "--detach", git("rev-parse", "HEAD"), cwd=dest)
    return dest


def release(tree: Path, *flags: str, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tree / "tools/release.sh"), "--home-url", HOME_URL, "--home-image", HOME_IMAGE,
         "--arch", "amd64", *flags],
        cwd=tree, capture_output=True, text=True, timeout=3600, check=False,
        env=env or dict(os.environ))


@pytest.fixture(scope="module")
def helm_bin() -> Path:
    """The helm tools/build-chart.sh packages with: $HELM (as there), else the last `helm` row
    of peers/pins.tsv."""
    if os.environ.get("HELM"):
        return Path(os.environ["HELM"])
    newest = [p for p in peers.all_peers() if p.name == "helm"][-1]
    return peers.built_or_skip("helm", newest.version).bin("helm")


@pytest.fixture(scope="module")
def signer(tmp_path_factory) -> cosign.Cosign:
    exe = cosign.binary()
    if exe is None:
        pytest.skip("no cosign: tools/unpack-deb.sh cosign/trixie usr/bin/cosign")
    return cosign.with_key_pair(exe, tmp_path_factory.mktemp("cosign"))


@pytest.fixture(scope="module")
def releases(tmp_path_factory, signer, helm_bin) -> dict[str, Path]:
    """Two releases of HEAD from two clones: one signed, one not."""
    needs_root()
    work = tmp_path_factory.mktemp("release")
    found = {}
    for side, flags in (("signed", ()), ("unsigned", ("--no-sign",))):
        tree = clone(work / side)
        env = {**signer.env(), "HELM": str(helm_bin)}
        r = release(tree, "--out", str(work / f"{side}-out"), *flags, env=env)
        assert r.returncode == 0, r.stderr[-4000:]
        found[side] = work / f"{side}-out"
        found[f"{side}-tree"] = tree
    return found


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.name not in UNSIGNED}


def digest_of(d: Path) -> str:
    return (d / f"{NAME}-image.digest").read_text().strip()


def test_two_releases_of_one_commit_are_the_same_bytes(releases):
    a, b = files(releases["signed"]), files(releases["unsigned"])
    assert sorted(a) == sorted([
        "SHA256SUMS", f"{NAME}-image.digest", f"{NAME}-image.oci.tar",
        f"{NAME}-linux-amd64.cdx.json", f"{NAME}-linux-amd64.tar.gz",
        f"{NAME}-provenance.slsa.json", f"{NAME}.tgz"])
    assert reprotar.first_difference(a, b) is None
    # SHA256SUMS covers every artifact, each with its digest.
    sums = dict(reversed(line.split()) for line in a["SHA256SUMS"].decode().splitlines())
    assert sorted(sums) == sorted(n for n in a if n != "SHA256SUMS")
    assert all(hashlib.sha256(a[n]).hexdigest() == h for n, h in sums.items())


def test_a_mismatch_names_the_first_differing_file(releases, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(releases["unsigned"], other)
    chart = other / f"{NAME}.tgz"
    entries = reprotar.members(chart.read_bytes())
    entries = [e if not e.name.endswith("values.yaml") else
               reprotar.Entry(e.name, e.mode, (e.data or b"") + b"# changed\n") for e in entries]
    chart.write_bytes(reprotar.gzipped(reprotar.tar_bytes(entries, 0)))
    r = subprocess.run(["python3", "-m", "tools.release", "diff", str(releases["unsigned"]),
                        str(other)], cwd=REPO, capture_output=True, text=True, check=False)
    assert r.returncode == 1
    assert r.stdout == f"first difference: {NAME}.tgz!cni-delguard/values.yaml\n"


def test_the_signatures_verify_and_a_tampered_chart_is_refused(releases, signer, tmp_path):
    d = releases["signed"]
    pub = d / "cosign.pub"
    for name in ("SHA256SUMS", f"{NAME}.tgz"):
        r = signer.run("verify-blob", "--key", str(pub), "--insecure-ignore-tlog=true",
                       "--signature", str(d / f"{name}.sig"), str(d / name))
        assert r.returncode == 0, r.stderr
    tampered = tmp_path / f"{NAME}.tgz"
    tampered.write_bytes(reprotar.normalize((d / f"{NAME}.tgz").read_bytes(), 1))
    r = signer.run("verify-blob", "--key", str(pub), "--insecure-ignore-tlog=true",
                   "--signature", str(d / f"{NAME}.tgz.sig"), str(tampered))
    assert r.returncode != 0
    assert "invalid signature" in r.stderr.lower(), r.stderr


def test_the_sbom_lists_the_bases_dpkg_status_and_the_bundles_packages(releases):
    sbom = json.loads((releases["signed"] / f"{NAME}-linux-amd64.cdx.json").read_text())
    def of(kind: str) -> set[tuple[str, str]]:
        return {(c["name"], c["version"]) for c in sbom["components"]
                if c["purl"].startswith(f"pkg:{kind}/")}

    debs, pypi = of("deb"), of("pypi")
    assert len(debs) + len(pypi) == len(sbom["components"])
    root = subprocess.run([str(REPO / "tools/build.sh"), "--root-template", "--arch", "amd64"],
                          capture_output=True, text=True, check=True, timeout=1800).stdout.strip()
    listed = subprocess.run(
        ["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W",
         "-f", "${Package} ${Version} ${db:Status-Status}\n"],
        capture_output=True, text=True, check=True).stdout.splitlines()
    installed = {tuple(line.split()[:2]) for line in listed if line.endswith(" installed")}
    assert debs == installed
    assert {"libc6", "libpython3.11", "python3.11"} <= {name for name, _ in debs}
    internal = releases["signed-tree"] / "dist" / "cni-delguard" / "_internal"
    frozen = {(d.metadata["Name"], d.version) for d in metadata.distributions(path=[str(internal)])}
    assert pypi == frozen
    assert "pydantic" in {name for name, _ in pypi}


def test_skopeo_reads_the_image_archive_by_its_digest(releases):
    if not shutil.which("skopeo"):
        pytest.skip("no skopeo (apt-get install skopeo)")
    d = releases["signed"]
    ref = f"oci-archive:{d / f'{NAME}-image.oci.tar'}:{__version__}"
    raw = subprocess.run(["skopeo", "inspect", "--raw", ref], capture_output=True, check=True,
                         timeout=300).stdout
    assert "sha256:" + hashlib.sha256(raw).hexdigest() == digest_of(d)
    config = json.loads(subprocess.run(
        ["skopeo", "--override-arch", "amd64", "inspect", "--config", ref],
        capture_output=True, text=True, check=True, timeout=300).stdout)
    assert config["config"]["Entrypoint"] == ["/usr/lib/cni-delguard/cni-delguard"]


def test_the_chart_names_the_release_image_by_digest(releases, helm_bin, tmp_path):
    d = releases["signed"]
    env = {**os.environ,
           **{f"HELM_{k}_HOME": str(tmp_path / k) for k in ("CONFIG", "CACHE", "DATA")}}
    shown = subprocess.run([str(helm_bin), "show", "values", str(d / f"{NAME}.tgz")],
                           capture_output=True, text=True, check=True, env=env).stdout
    image = yaml.safe_load(shown)["image"]
    assert (image["repository"], image["digest"]) == (HOME_IMAGE, digest_of(d))
    rendered = subprocess.run(
        [str(helm_bin), "template", "cni-delguard", str(d / f"{NAME}.tgz"), "-n", "kube-system"],
        capture_output=True, text=True, check=True, env=env).stdout
    (ds,) = [o for o in yaml.safe_load_all(rendered) if o and o["kind"] == "DaemonSet"]
    images = {c["image"] for c in ds["spec"]["template"]["spec"]["containers"]}
    assert images == {f"{HOME_IMAGE}@{digest_of(d)}"}


def test_the_bundle_tarball_holds_the_bundle(releases, tmp_path):
    with tarfile.open(releases["signed"] / f"{NAME}-linux-amd64.tar.gz") as tar:
        tar.extractall(tmp_path, filter="tar")
    built = releases["signed-tree"] / "dist" / "cni-delguard"
    assert bundle.tree_digest(str(tmp_path / "cni-delguard")) == bundle.tree_digest(str(built))


@pytest.mark.parametrize(("change", "flags", "message"), [
    pytest.param("touch", (), "a release is made from a clean commit", id="untracked-file"),
    pytest.param("edit", (), "a release is made from a clean commit", id="changed-file"),
    pytest.param(None, ("--home-url", ""), "there is no default address", id="no-home"),
])
def test_refused(tmp_path, change, flags, message):
    tree = clone(tmp_path / "tree")
    if change == "touch":
        (tree / "new-file").write_text("x")
    elif change == "edit":
        with open(tree / "LICENSE", "a", encoding="utf-8") as f:
            f.write("\n")
    r = release(tree, "--no-sign", *flags)
    assert r.returncode != 0
    assert message in r.stderr
    assert not (tree / "dist" / "release").exists()


def test_push_to_a_registry_signs_the_image_and_prints_the_install(releases, signer, helm_bin,
                                                                   tmp_path):
    """`--from DIR --push REGISTRY` to a real registry on loopback: the image keeps its digest,
    cosign verifies it and its provenance by digest, helm pulls the very chart that was signed,
    the printed install names it; an image pushed under the release's tag by someone without the
    key is refused (tests/e2e_cluster installs from such a registry on a cluster)."""
    exe = registry.binary()
    if exe is None:
        pytest.skip("no docker-registry: tools/unpack-deb.sh docker-registry ...")
    d = releases["signed"]
    env = {**signer.env(), "HELM": str(helm_bin),
           **{f"HELM_{k}_HOME": str(tmp_path / k) for k in ("CONFIG", "CACHE", "DATA")}}
    with registry.running(exe, tmp_path / "registry") as where:
        r = subprocess.run([str(REPO / "tools/release.sh"), "--home-url", HOME_URL,
                            "--home-image", HOME_IMAGE, "--from", str(d), "--push", where],
                           capture_output=True, text=True, timeout=600, env=env, check=False)
        assert r.returncode == 0, r.stderr[-3000:]
        ref = f"{where}/cni-delguard@{digest_of(d)}"
        assert f"cosign verify --key cosign.pub --insecure-ignore-tlog=true " \
               f"--allow-http-registry {ref}" in r.stdout
        assert f"oci://{where}/charts/cni-delguard --version {__version__}" in r.stdout
        assert f"--set image.repository={where}/cni-delguard" in r.stdout
        trust = ("--key", str(d / "cosign.pub"), "--insecure-ignore-tlog=true",
                 "--allow-http-registry")
        assert signer.run("verify", *trust, ref).returncode == 0
        attested = signer.run("verify-attestation", *trust, "--type", "slsaprovenance1", ref)
        assert attested.returncode == 0, attested.stderr
        (tmp_path / "pulled").mkdir()
        pulled = subprocess.run(
            [str(helm_bin), "pull", "--plain-http", f"oci://{where}/charts/cni-delguard",
             "--version", __version__, "--destination", str(tmp_path / "pulled")],
            capture_output=True, text=True, env=env, timeout=300, check=False)
        assert pulled.returncode == 0, pulled.stderr
        chart = (tmp_path / "pulled" / f"{NAME}.tgz").read_bytes()
        assert chart == (d / f"{NAME}.tgz").read_bytes()
        swapped = subprocess.run(
            ["skopeo", "copy", "--quiet", "--format", "v2s2", "--dest-tls-verify=false",
             f"oci-archive:{d / f'{NAME}-image.oci.tar'}:{__version__}",
             f"docker://{where}/cni-delguard:{__version__}"],
            capture_output=True, text=True, timeout=300, check=False)
        assert swapped.returncode == 0, swapped.stderr
        refused = signer.run("verify", *trust, f"{where}/cni-delguard:{__version__}")
        assert refused.returncode != 0
        assert "no signatures found" in refused.stderr.lower() or \
            "no matching signatures" in refused.stderr.lower(), refused.stderr
