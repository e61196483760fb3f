"""The guard on a cluster the way users put it there: the chart with `helm install oci://...`
from the cluster's registry, once publish.py verified it, or the kustomize overlays with
`kubectl apply -k`; and what a user looks at afterwards (the rollout, the pod's readiness,
`cni-delguard ready` run in the pod, the metrics endpoint, the node's CNI dirs).

The values every install here passes, each as docs/install.md tells users: `--wrap
stale-delegate` (the chain's first plugin is the stateful fake, not multus) and the metrics
endpoint on. The image is the chart's default: the release's, by digest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.e2e_cluster import publish
from tests.e2e_cluster.controlplane import FETCH
from tests.e2e_cluster.site import CONFLIST, Cluster, Release
from tests.support.kustomize import KUSTOMIZE

RELEASE = "cni-delguard"
NAMESPACE = "kube-system"
METRICS_PORT = 10647
BINARY = "/usr/lib/cni-delguard/cni-delguard"
ROLLOUT_BOUND = "600s"
CNI_BIN = "/opt/cni/bin"


def chart_ref(release: Release) -> list[str]:
    """The release's chart in the cluster's registry (a loopback one: plain HTTP)."""
    return [f"{publish.CHARTS}/cni-delguard", "--version", release.version, "--plain-http"]


def chart_args(release: Release, *more: str, wrap: str | None = "stale-delegate") -> list[str]:
    """The chart and its values; `wrap`: the plugin to guard when it is not multus (which the
    installer finds by itself)."""
    args = [*chart_ref(release), "--set", "prometheus.enabled=true"]
    if wrap is not None:
        args += ["--set-json", f'extraArgs=["--wrap","{wrap}"]']
    return [*args, *more]


def helm_install(c: Cluster, release: Release, *more: str, namespace: str = NAMESPACE,
                 check: bool = True, wrap: str | None = "stale-delegate",
                 ) -> subprocess.CompletedProcess[str]:
    return c.helm.run("install", RELEASE, *chart_args(release, *more, wrap=wrap), "--namespace",
                      namespace, check=check)


def rollout(c: Cluster, namespace: str = NAMESPACE) -> str:
    return c.kube.run("-n", namespace, "rollout", "status", "ds/cni-delguard",
                      f"--timeout={ROLLOUT_BOUND}", timeout=700).stdout


def ready_in_pod(c: Cluster, namespace: str = NAMESPACE) -> subprocess.CompletedProcess[str]:
    """`cni-delguard ready` run in the DaemonSet's pod, as a user would (kubectl exec)."""
    return c.kube.run("-n", namespace, "exec", "ds/cni-delguard", "--", BINARY, "ready",
                      "--root", "/host", check=False)


def scrape(c: Cluster) -> str:
    """GET the watcher's metrics endpoint at the node's IP, from the node's network."""
    url = f"http://{c.node.ip}:{METRICS_PORT}/metrics"
    out = subprocess.run([*c.node.netns(), sys.executable, "-I", "-c", FETCH, url],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def bin_listing(c: Cluster) -> list[str]:
    return sorted(p.name for p in c.node.path(CNI_BIN).iterdir())


def bundle_dirs(c: Cluster) -> list[str]:
    return sorted(n for n in bin_listing(c) if n.startswith(".cni-delguard-"))


def link_target(c: Cluster) -> str:
    link = c.node.path(CNI_BIN) / "cni-delguard"
    return str(link.readlink()) if link.is_symlink() else ""


def guard_entry(c: Cluster) -> dict[str, Any]:
    """The guard's plugin in the node's conflist (its delegate's knobs left out)."""
    conf = json.loads(c.node.path(CONFLIST).read_text(encoding="utf-8"))
    (entry,) = [p for p in conf["plugins"] if p.get("type") == "cni-delguard"]
    return {k: v for k, v in entry.items() if k != "delegate"} | {
        "delegate.type": entry["delegate"]["type"]}


def kustomize_dir(c: Cluster, overlay: str, release: Release) -> Path:
    """A user's kustomization over one of ours: the image set to the release's, by digest, and
    the wrap of the chain's plugin, the documented way. Ours is named by a relative path:
    kustomize refuses an absolute one."""
    work = c.node.tmp / f"kustomize-{overlay}"
    work.mkdir(exist_ok=True)
    patch = [{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": v}
             for v in ("--wrap", "stale-delegate")]
    text = (
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {os.path.relpath(KUSTOMIZE / 'overlays' / overlay, work)}\n"
        f"images:\n  - name: localhost/cni-delguard\n    newName: {publish.IMAGE}\n"
        f"    digest: {release.digest}\n"
        "patches:\n  - target:\n      kind: DaemonSet\n      name: cni-delguard\n"
        f"    patch: '{json.dumps(patch)}'\n")
    (work / "kustomization.yaml").write_text(text, encoding="utf-8")
    return work
