"""The kubelet of the kubelet suite (tests/e2e_kubelet/kubelet.py: the same binary, cgroups,
kernel settings, image GC off), registered to the cluster's API server instead of standalone:

- a kubeconfig with its client certificate (system:node:<name>, pki.py), so the Node authorizer
  and NodeRestriction treat it as that node; it registers its Node object and runs the pods the
  scheduler binds to it;
- its server on the node's IP, port 10250, with the API server's authentication (the cluster CA
  for client certificates, webhook token review) and authorization (webhook): `kubectl exec` and
  `kubectl logs` reach it as on any node; no read-only port;
- healthz on the node's 127.0.0.1:10248 (serving(): how start() knows it is up).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e_cluster.controlplane import FETCH
from tests.e2e_cluster.node import Node
from tests.e2e_kubelet.kubelet import Kubelet as StandaloneKubelet

HEALTHZ_PORT = 10248


@dataclass
class Kubelet(StandaloneKubelet):
    kubeconfig: Path | None = None
    client_ca: Path | None = None

    @property
    def cluster_node(self) -> Node:
        assert isinstance(self.node, Node)
        return self.node

    def config(self) -> dict[str, Any]:
        assert self.client_ca is not None
        config = super().config()
        config.update({
            "authentication": {"anonymous": {"enabled": False},
                               "webhook": {"enabled": True},
                               "x509": {"clientCAFile": str(self.client_ca)}},
            "authorization": {"mode": "Webhook"},
            "enableServer": True,
            "address": self.cluster_node.ip,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": HEALTHZ_PORT,
        })
        return config

    def argv(self, config: Path) -> list[str]:
        return [*super().argv(config), f"--kubeconfig={self.kubeconfig}",
                f"--node-ip={self.cluster_node.ip}"]

    def serving(self) -> bool:
        url = f"http://127.0.0.1:{HEALTHZ_PORT}/healthz"
        out = subprocess.run([*self.node.enter_all, sys.executable, "-I", "-c", FETCH, url],
                             capture_output=True, text=True, timeout=60, check=False)
        return out.returncode == 0 and out.stdout.strip() == "ok"
