"""The reported stack under a real kubelet: the scenario the CRI driver cannot show, a DEL that
keeps failing while the kubelet's own retries and garbage collection decide what happens.

The node is this suite's (node.py: its own mount and network namespaces, the kubelet standalone),
the chain tests/support/reported_stack.py's, a Cozystack v1.2.0 node's conf dir: multus v4.2.3
thick in auto mode in front of 05-cilium.conflist (the real kube-ovn CNI, portmap, the real
cilium-cni), the kube-ovn daemon and cilium-agent stand-ins, multus's daemon under its 100m CPU
limit, and with the guard its installer. The stack's daemons run in the node's mount namespace,
multus's in its network namespace too, where the chain's API server listens
(tests/support/reported_stack.py says why); portmap, asked for no port mappings, touches no
iptables. The pods are static pods; their mirror pods, which a kubelet with an API server would
create, are put into the chain's API beforehand with the annotation that makes multus accept them
whatever their UID (kubernetes.io/config.source: file; multus pkg/k8sclient/k8sclient.go:732
IsStaticPod, pkg/multus/multus.go:621).

kube-ovn-ovsdb-down-del: a pod Ready; kube-ovn's OVSDB then unhealthy, so its daemon answers
every DEL with a 500 after ovs-vsctl's 30 s (kube-ovn v1.15.3 pkg/ovs/ovs-vsctl.go: every call
runs with --timeout=30; pkg/daemon/handler.go answers 500 at the first failure; the plugin turns
it into code 11 "RPC failed"); multus's daemon restarts as the pod is deleted (its 00-multus.conf
removed, so the kubelet's StopPodSandbox runs 05-cilium.conflist directly: cilium-cni's DEL, then
kube-ovn's) and is back RESTART_WINDOW seconds later. The verdict: removed (the sandbox gone), or
stuck when it is still there STOP_DEADLINE plus three GC periods after the deletion.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

import grpc

from tests.e2e_cri import cri, pause_image
from tests.e2e_cri.reported import RESTART_WINDOW, STOP_DEADLINE, Evidence
from tests.e2e_kubelet.kubelet import (
    GC_PERIOD,
    NAMESPACE,
    VERSION,
    Kubelet,
    is_ready,
    plain_pod,
)
from tests.e2e_kubelet.node import Node
from tests.e2e_kubelet.runtimes import RUNTIMES, Runtime
from tests.e2e_kubelet.site import READY_BOUND, Shared, elapsed, skip_or_fail
from tests.support.multus import NODE
from tests.support.reported_stack import ReportedStack
from tests.support.waiting import wait_for

MULTUS = "v4.2.3"  # the report's
VERDICT_BOUND = STOP_DEADLINE + 3 * GC_PERIOD
FAILURE_WORDS = ("RPC failed", "context deadline exceeded", "DeadlineExceeded")


@dataclass
class Site:
    node: Node
    kubelet: Kubelet
    cri: cri.CriClient
    stack: ReportedStack

    def start_pod(self, name: str) -> None:
        """The static pod, its mirror pod in the API first (multus reads it at ADD)."""
        full = f"{name}-{self.kubelet.node_name}"
        self.stack.api.put_pod(NAMESPACE, full, f"mirror-{full}", NODE, annotations={
            "kubernetes.io/config.source": "file", "kubernetes.io/config.mirror": "mirror"})
        self.kubelet.put(name, plain_pod(name, pause_image.IMAGE_REF))

    def sandbox_ids(self, name: str | None = None) -> set[str]:
        full = None if name is None else f"{name}-{self.kubelet.node_name}"
        return {s.id for s in self.cri.list_pods() if full in (None, s.metadata.name)}

    def loaded(self, want: str) -> bool:
        try:
            text = self.cri.cni_config()
        except grpc.RpcError:
            return False
        if want == "kube-ovn":  # cilium's generic-veth list, no multus in front
            return "generic-veth" in text and "multus-shim" not in text
        return want in text


@contextlib.contextmanager
def site(runtime: Runtime, guarded: bool, shared: Shared) -> Iterator[Site]:
    node = Node.create_for(runtime)
    kubelet = Kubelet(node)
    client: cri.CriClient | None = None
    stack: ReportedStack | None = None
    try:
        node.install_debian_plugins(("loopback", "portmap"))
        node.come_up(shared.pause_archive)
        client = cri.CriClient(node.socket, shared.stubs, node.cgroup_parent)
        wait_for(lambda: client is not None and client.image_known(pause_image.IMAGE_REF),
                 "CRI to see the pause image")
        stack = ReportedStack(MULTUS, guarded, node.name, node.cni_bin, node.cni_conf, node.run,
                              node.tmp / "stack")
        stack.start(node.enter)
        here = Site(node, kubelet, client, stack)
        wait_for(lambda: here.loaded(stack.final_conf()), "containerd to load the stack's conf",
                 timeout=60, every=0.2)
        kubelet.start()
        yield here
    finally:
        kubelet.kill()
        if stack is not None:
            stack.stop()
        if client is not None:
            client.close()
        problems = node.teardown()
        assert not problems, f"node teardown left things behind: {problems}"


def kube_ovn_ovsdb_down_del(here: Site, ev: Evidence) -> None:
    stack = here.stack
    here.start_pod("kh")
    wait_for(lambda: is_ready(here.kubelet.pod("kh")), "pod kh Ready", timeout=READY_BOUND,
             every=1, detail=here.kubelet.log_tail)
    [sandbox] = here.sandbox_ids("kh")
    stack.kube_ovn.mode(delete="ovsdb-down")
    stack.multus.stop_daemon()
    wait_for(lambda: here.loaded("kube-ovn"), "containerd to load 05-cilium.conflist",
             timeout=60, every=0.2)
    since = time.monotonic()
    here.kubelet.delete("kh")
    time.sleep(RESTART_WINDOW)
    stack.multus.start_in(here.node.enter)
    if stack.installer is not None:
        stack.wait_wrapped()
    try:
        wait_for(lambda: sandbox not in here.sandbox_ids(), "the kubelet to remove the sandbox",
                 timeout=VERDICT_BOUND - (time.monotonic() - since), every=2)
        ev.outcome = "removed"
    except AssertionError:
        ev.outcome = "stuck"
    ev.seconds = elapsed(since)
    ev.multus_dels = stack.multus_dels(sandbox)
    ev.kube_ovn_dels = stack.kube_ovn_dels(sandbox)
    failures = [line for line in here.kubelet.log_lines(sandbox[:12])
                if any(w in line for w in FAILURE_WORDS)]
    ev.errors = [line[:700] for line in failures[:3]]
    ev.facts["del_failures"] = len(failures)
    ev.facts["ports_leaked"] = len(stack.kube_ovn.held_ports())
    ev.facts["cilium_dels"] = stack.cilium.deletes(sandbox)
    ev.facts["cilium_replayed"] = stack.cilium.replayed()


@dataclass(frozen=True)
class Run:
    scenario: str
    runtime: Runtime
    guard: bool
    minutes: int

    @property
    def id(self) -> str:
        return f"{self.runtime.key}-{'with' if self.guard else 'without'}-guard"


RUNS = [Run("kube-ovn-ovsdb-down-del", rt, guard, 5) for rt in RUNTIMES for guard in (False, True)]


def run(spec: Run, shared: Shared) -> Evidence:
    why = spec.runtime.missing()
    if why is not None:
        skip_or_fail(f"{spec.runtime.key}: {why}")
    ev = Evidence(spec.scenario, spec.runtime.key, spec.runtime.version(), "", spec.guard,
                  driver="kubelet", kubernetes=VERSION)
    try:
        with site(spec.runtime, spec.guard, shared) as here:
            ev.delegate = here.stack.delegate
            kube_ovn_ovsdb_down_del(here, ev)
            ev.record(spec.runtime.runtime)
    finally:
        ev.save()
    return ev
