"""STAND-IN, for tests only: kube-ovn-controller's part in a pod's address, without OVN: it
allocates a pod's address when the pod appears and frees it when the pod is deleted, on the chain's
API server (tests/support/kubeapi.py), in the test's process.

The real controller is a Deployment off the node, so it lives through the node's power cut; this
one is a thread of the test, which the node's power-off does not touch either. What it copies
from kube-ovn v1.15.3 (pkg/controller), and nothing more:

- Allocation: a pod of the node gets, `allocate_after` seconds after it appears (None: never),
  the annotations the daemon waits for (ovn.kubernetes.io/allocated, routed, ip_address, cidr,
  gateway, logical_switch, mac_address; pod.go handleAddOrUpdatePod / reconcileAllocateSubnets),
  and with them its logical switch port, its IP CR and its address in IPAM, each named
  <pod>.<namespace> (ovs.PodNameToPortName for provider ovn).
- Release: when the pod is deleted, handleDeletePod deletes its logical switch port, its IP CR
  and its IPAM address at once (pod.go:1002-1200), unless a pod of the same name is there again
  (pod.go:1020-1024: it keeps them; so do a StatefulSet's and a VM's pods, which no pod here is).
  The allocation's `released` is the time.
- Not modelled: the logical-port GC every 360 s (gc.go markAndCleanLSP, --gc-interval default
  360, config.go:213). It frees what the release above missed, a deletion the controller did not
  see; this controller sees every deletion (the API server is in the test's process), so the GC
  would find nothing.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tests.support.kubeapi import KubeAPI

POLL = 0.1  # how often it looks at the API server's pods (seconds)
CIDR = "10.16.0.0/16"
GATEWAY = "10.16.0.1"


def pod_address(namespace: str, name: str) -> str:
    """An address in the pod CIDR from the pod's key (distinct from the daemon's fallback, which
    comes from a container ID)."""
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return f"10.16.{digest[0]}.{digest[1] % 253 + 2}"


@dataclass
class Allocation:
    """What the controller holds for one pod: its port, IP CR and address."""

    key: str  # namespace/name
    uid: str
    address: str
    allocated: float  # time.time() of the allocation
    released: float | None = None


@dataclass
class KubeOvnController:
    api: KubeAPI
    node: str
    allocate_after: float | None = 0.0
    allocations: list[Allocation] = field(default_factory=list)
    _seen: dict[str, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kube-ovn-controller",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def held(self) -> list[Allocation]:
        """The allocations not released."""
        return [a for a in self.allocations if a.released is None]

    def _run(self) -> None:
        while not self._stop.wait(POLL):
            self.reconcile()

    def reconcile(self) -> None:
        """One look: allocate what is due, release what lost its pod."""
        _, pods = self.api.store.listing(
            "pods", lambda o: o.get("spec", {}).get("nodeName") == self.node)
        now = time.time()
        live = {}
        for pod in pods:
            meta = pod["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            live[key] = str(meta.get("uid", ""))
            since = self._seen.setdefault(f"{key}/{live[key]}", now)
            notes = meta.get("annotations") or {}
            if notes.get("ovn.kubernetes.io/allocated") != "true" \
                    and self.allocate_after is not None and now - since >= self.allocate_after:
                self._allocate(pod, key, now)
        for a in self.held():
            if a.key not in live:
                a.released = now
            elif live[a.key] != a.uid:
                a.uid = live[a.key]  # a new pod of that name: handleDeletePod leaves it be

    def _allocate(self, pod: dict[str, Any], key: str, now: float) -> None:
        meta = pod["metadata"]
        ip = pod_address(meta["namespace"], meta["name"])
        digest = hashlib.sha256(key.encode()).digest()
        updated = json.loads(json.dumps(pod))
        updated["metadata"].setdefault("annotations", {}).update({
            "ovn.kubernetes.io/allocated": "true", "ovn.kubernetes.io/routed": "true",
            "ovn.kubernetes.io/ip_address": ip, "ovn.kubernetes.io/cidr": CIDR,
            "ovn.kubernetes.io/gateway": GATEWAY, "ovn.kubernetes.io/logical_switch": "ovn-default",
            "ovn.kubernetes.io/mac_address": "00:00:01:" + ":".join(f"{b:02x}" for b in digest[:3]),
        })
        self.api.store.put("pods", updated)
        if not any(a.key == key for a in self.held()):  # a pod of that name again keeps its own
            self.allocations.append(Allocation(key, str(meta.get("uid", "")), ip, now))
