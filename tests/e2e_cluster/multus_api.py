"""The cluster's real API server as multus's (tests/support/multus.py's ApiServer), where the
other suites use tests/support/kubeapi.py's stand-in.

What multus's own thick deployment (deployments/multus-daemonset-thick.yml of the multus module
at the peer's version, read from the Go module cache where tools/install-peers.sh fetched it,
verified by peers/multus-v4.3.0/go.sum) makes before its DaemonSet runs is applied as it is: the
NetworkAttachmentDefinition CRD, the `multus` ClusterRole (pods get/list/watch/update, NADs,
events), its binding and the `multus` service account in kube-system. The daemon then reads its
service account's files as its pod would: a token the API server issues for that account
(`kubectl create token`, the TokenRequest API a projected volume uses), the cluster's CA, and
KUBERNETES_SERVICE_HOST/PORT naming the API server at the node's IP.

Pods are real pods here (the scheduler binds them, the kubelet runs them): put_pod and
delete_pod, which the stand-in offers for suites without a kubelet, are not.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.e2e_cluster.controlplane import API_PORT
from tests.e2e_cluster.kube import Kube
from tests.e2e_cluster.node import Node
from tests.support import peers
from tests.support.multus import VERSION

DEPLOYMENT = "deployments/multus-daemonset-thick.yml"
KINDS = ("CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "ServiceAccount")


def multus_source() -> Path:
    """The multus module's dir in the module cache, as go.sum of our peer module pins it."""
    peer = peers.find("multus", VERSION)
    out = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", peer.source],
                         cwd=peer.module, capture_output=True, text=True, timeout=300,
                         check=True, env=dict(os.environ, GOFLAGS="-mod=readonly"))
    return Path(out.stdout.strip())


def multus_objects() -> list[dict[str, Any]]:
    text = (multus_source() / DEPLOYMENT).read_text(encoding="utf-8")
    return [d for d in yaml.safe_load_all(text) if d and d["kind"] in KINDS]


@dataclass
class RealAPI:
    kube: Kube
    node: Node
    ca: Path

    def start(self) -> None:
        self.kube.apply(*multus_objects())
        self.kube.run("wait", "--for=condition=Established",
                      "crd/network-attachment-definitions.k8s.cni.cncf.io", "--timeout=120s")

    def stop(self) -> None:
        """The cluster's, torn down with it."""

    def token(self) -> str:
        return self.kube.run("-n", "kube-system", "create", "token", "multus",
                             "--duration=4h").stdout.strip()

    def service_account(self, directory: Path) -> dict[str, str]:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "token").write_text(self.token(), encoding="utf-8")
        (directory / "ca.crt").write_bytes(self.ca.read_bytes())
        (directory / "namespace").write_text("kube-system", encoding="utf-8")
        return {"KUBERNETES_SERVICE_HOST": self.node.ip, "KUBERNETES_SERVICE_PORT": str(API_PORT)}

    def kubeconfig(self, path: Path) -> Path:
        raise NotImplementedError("multus thin is not run against the cluster")

    def put_pod(self, namespace: str, name: str, uid: str, node: str,
                annotations: dict[str, str] | None = None) -> None:
        raise NotImplementedError("pods are real here: created with kubectl, run by the kubelet")

    def delete_pod(self, namespace: str, name: str) -> bool:
        raise NotImplementedError("pods are real here: deleted with kubectl")
