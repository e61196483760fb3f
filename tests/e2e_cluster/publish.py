"""A release on a cluster's registry, as the project publishes it and as a user checks it.

- The registry: Debian's docker-registry (tests/support/registry.py) in the node's network
  namespace on its loopback, 127.0.0.1:5000 (REGISTRY): the address every release of the suite is
  made for (the chart's default image names it, by digest), reachable by the node's containerd,
  which speaks plain HTTP to a loopback registry by default (containerd's CRI `defaultScheme`:
  docker.IsLocalhost), and by nothing outside the node.
- The releaser: `tools/release.sh --from DIR --push REGISTRY` pushes the image and the chart,
  signs the image (cosign sign) and attests its provenance (cosign attest), with the suite's key.
- The user: `cosign verify` of the image by digest, `cosign verify-attestation` of its
  provenance, `helm pull` of the chart and `cosign verify-blob` of it with the release's
  signature and public key; only then `helm install oci://...` (install.py). A tampered chart
  and an image the key never signed are refused by the same commands (refusals()).
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support import cosign, registry
from tools.release import reprotar

if TYPE_CHECKING:
    from tests.e2e_cluster.site import Cluster, Release

REPO = Path(__file__).resolve().parents[2]
REGISTRY = "127.0.0.1:5000"
IMAGE = f"{REGISTRY}/cni-delguard"
CHARTS = f"oci://{REGISTRY}/charts"
HOME_URL = "https://example.invalid/cni-delguard"  # the suite's releases' home (RFC 2606)


def start_registry(c: Cluster, stack: contextlib.ExitStack) -> None:
    exe = registry.binary()
    assert exe is not None, "no docker-registry: tools/unpack-deb.sh docker-registry ..."
    stack.enter_context(registry.running(exe, c.node.tmp / "registry", REGISTRY,
                                         netns=c.node.netns()))


def run(c: Cluster, signer: cosign.Cosign, *argv: str,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """A releaser's or a user's command in the node's network namespace."""
    env = signer.env() | c.helm.helm.env() | {"HELM": str(c.helm.helm.peer.bin("helm"))}
    return subprocess.run([*c.node.netns(), *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=signer.home, check=False)


def push(c: Cluster, release: Release) -> None:
    r = run(c, release.signer, str(REPO / "tools/release.sh"), "--home-url", HOME_URL,
            "--home-image", IMAGE, "--from", str(release.dir), "--push", REGISTRY)
    assert r.returncode == 0, r.stderr[-3000:]


def cosign_args(release: Release, *argv: str) -> list[str]:
    """cosign ARGV... with the release's public key, no transparency log; the subject last."""
    *flags, subject = argv
    return [str(release.signer.exe), *flags, "--key", str(release.dir / "cosign.pub"),
            "--insecure-ignore-tlog=true", subject]


def verify(c: Cluster, release: Release) -> dict[str, Any]:
    """What a user runs before installing: each command's exit code and last words."""
    ref = f"{IMAGE}@{release.digest}"
    pulled = c.node.tmp / f"pulled-{release.version}"
    pulled.mkdir(exist_ok=True)
    steps = {
        "image": cosign_args(release, "verify", "--allow-http-registry", ref),
        "provenance": cosign_args(release, "verify-attestation", "--allow-http-registry",
                                  "--type", "slsaprovenance1", ref),
        "pull": [str(c.helm.helm.peer.bin("helm")), "pull", "--plain-http",
                 f"{CHARTS}/cni-delguard", "--version", release.version, "--destination",
                 str(pulled)],
        "chart": cosign_args(release, "verify-blob", "--signature",
                             str(release.dir / f"{release.chart.name}.sig"),
                             str(pulled / release.chart.name)),
    }
    found = {}
    for name, argv in steps.items():
        r = run(c, release.signer, *argv)
        found[name] = {"code": r.returncode, "said": (r.stdout + r.stderr).strip()[-500:]}
        assert r.returncode == 0, f"{name}: {found[name]}"
    return found


def refusals(c: Cluster, release: Release) -> dict[str, Any]:
    """The same verification of what a user must not install: the chart with one byte of its
    values changed, and the image pushed under the release's tag by someone without the key
    (the same image, stored as another manifest: another digest)."""
    pulled = c.node.tmp / f"pulled-{release.version}" / release.chart.name
    tampered = c.node.tmp / "tampered" / release.chart.name
    tampered.parent.mkdir(exist_ok=True)
    entries = [e if not e.name.endswith("/values.yaml") else
               reprotar.Entry(e.name, e.mode, (e.data or b"").replace(b"pullPolicy: IfNotPresent",
                                                                      b"pullPolicy: Always"))
               for e in reprotar.members(pulled.read_bytes())]
    tampered.write_bytes(reprotar.gzipped(reprotar.tar_bytes(entries, 0)))
    chart = run(c, release.signer, *cosign_args(
        release, "verify-blob", "--signature", str(release.dir / f"{release.chart.name}.sig"),
        str(tampered)))
    archive = release.dir / f"cni-delguard-{release.version}-image.oci.tar"
    swapped = run(c, release.signer, "skopeo", "copy", "--quiet", "--format", "v2s2",
                  "--dest-tls-verify=false", f"oci-archive:{archive}:{release.version}",
                  f"docker://{IMAGE}:{release.version}")
    assert swapped.returncode == 0, swapped.stderr
    image = run(c, release.signer, *cosign_args(release, "verify", "--allow-http-registry",
                                                f"{IMAGE}:{release.version}"))
    return {name: {"code": r.returncode, "said": (r.stdout + r.stderr).strip()[-500:]}
            for name, r in (("chart", chart), ("image", image))}
