"""The clients a user runs against the cluster: kubectl (the control-plane row's, the API server's
own release) and helm (peers/pins.tsv), as the cluster's admin, run in the node's network
namespace (the API server listens there only). Helm has its own config, cache and data dirs
(tests/support/helm.py's Helm), never the user's.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.e2e_cluster.controlplane import K8S_VERSION, kubectl_bin
from tests.e2e_cluster.node import Node
from tests.support import peers
from tests.support.helm import Helm

HELM_VERSION = "v3.22.0"  # the helm row users of a 1.35 cluster most often have


@dataclass
class Kube:
    node: Node
    kubeconfig: Path
    version: str = K8S_VERSION  # kubectl of the API server's own release

    def run(self, *args: str, stdin: str | None = None, timeout: float = 120,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        out = subprocess.run([*self.node.netns(), str(kubectl_bin(self.version)),
                              f"--kubeconfig={self.kubeconfig}", *args], input=stdin,
                             capture_output=True, text=True, timeout=timeout, check=False)
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {out.returncode}:\n"
                                 f"{out.stderr}{out.stdout[-2000:]}")
        return out

    def get(self, *args: str) -> Any:
        return json.loads(self.run("get", "-o", "json", *args).stdout)

    def items(self, *args: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.get(*args).get("items") or []
        return found

    def apply(self, *objects: dict[str, Any]) -> str:
        text = yaml.safe_dump_all(list(objects))
        return self.run("apply", "--server-side", "--force-conflicts", "-f", "-",
                        stdin=text).stdout


@dataclass
class ClusterHelm:
    """A helm row run against the cluster (its kubeconfig) from the node's network namespace."""

    node: Node
    kubeconfig: Path
    home: Path
    version: str = HELM_VERSION

    @property
    def helm(self) -> Helm:
        return Helm(peers.find("helm", self.version), self.home)

    def run(self, *args: str, timeout: float = 600,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        env = self.helm.env() | {"KUBECONFIG": str(self.kubeconfig)}
        out = subprocess.run([*self.node.netns(), str(self.helm.peer.bin("helm")), *args],
                             capture_output=True, text=True, timeout=timeout, env=env,
                             check=False)
        if check and out.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} exited {out.returncode}:\n"
                                 f"{out.stderr}{out.stdout[-2000:]}")
        return out
