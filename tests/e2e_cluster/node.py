"""A node of the cluster suite: the kubelet suite's node (tests/e2e_kubelet/node.py: its own mount
and network namespaces, the kubeadm dirs bound where a node has them, a power-off that kills
everything and empties /run), with an address of its own and a control plane inside it.

- The node's network namespace gets an interface `node0` with NODE_IP (one end of a veth pair
  whose other end stays in the namespace too: the machine's kernel has no dummy driver, and a
  veth is what the bridge plugin uses anyway), so that the node has an address: the kubelet refuses
  a loopback node IP, a hostNetwork pod's status.hostIP (the metrics endpoint's address) is this
  one, and the API server advertises it. The namespace is the node's: every node of a run has
  the same address, none of them reachable from the machine, nothing listening on the host's
  interfaces.
- The control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) runs as
  processes in the node's namespaces, as a one-node kubeadm cluster's static pods do on its one
  machine: a power-off kills it with everything else and the boot starts it again from its data
  on disk (etcd's dir under the node's temp dir).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import ClassVar

from tests.e2e_kubelet.node import Node as KubeletNode

NODE_IP = "10.251.74.1"
NODE_PREFIX = 24
DEVICE = "node0"
PEER = "node0p"
PREFIX = "dgcl-"


@dataclass
class Node(KubeletNode):
    prefix: ClassVar[str] = PREFIX

    @property
    def ip(self) -> str:
        return NODE_IP

    def netns(self) -> list[str]:
        """The argv prefix that runs a client (kubectl, helm) in the node's network namespace
        only: it reaches the API server and the node's ports, and reads the machine's files."""
        assert self.holder is not None
        return ["nsenter", f"--net=/proc/{self.holder.pid}/ns/net", "--"]

    def start_holder(self) -> None:
        super().start_holder()
        for argv in (["ip", "link", "add", DEVICE, "type", "veth", "peer", "name", PEER],
                     ["ip", "addr", "add", f"{NODE_IP}/{NODE_PREFIX}", "dev", DEVICE],
                     ["ip", "link", "set", PEER, "up"], ["ip", "link", "set", DEVICE, "up"]):
            subprocess.run([*self.netns(), *argv], check=True, capture_output=True, timeout=30)
