"""The reported stack's scenarios (issue 35), driven over CRI as the kubelet drives a runtime, each
on a node of its own: tests/support/reported_stack.py's chain, a Cozystack v1.2.0 node's conf dir
(multus thick in auto mode in front of 05-cilium.conflist: the real kube-ovn CNI, portmap, the
real cilium-cni; the kube-ovn daemon and cilium-agent stand-ins, multus's daemon under its 100m
CPU limit, and with the guard its installer), on one runtime row.

The kubelet's part is played with the kubelet's own numbers: RunPodSandbox gets 4 minutes and
StopPodSandbox/RemovePodSandbox 2 (its runtime request deadlines, BACKGROUND.md), a call that
fails is tried again after the pod worker's back-off, 10 s (pkg/kubelet/kubelet.go:222
backOffPeriod), and its GC removes a pod's older sandboxes once a minute (kubelet.go:228
ContainerGCPeriod). Each scenario ends with one of tests/support/matrix.py's outcomes, the seconds
until the pod runs again, and the DELs that reached multus's daemon and kube-ovn's daemon
(Evidence; cilium-agent's in its facts), recorded as a matrix row (chain cozystack-multus-v4.2.3
or cozystack-multus-v4.3.0) and kept as JSON beside the matrix (.cache/e2e/reported/).
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import grpc

from tests.e2e_cri import pause_image, reported_lifetimes, windows
from tests.e2e_cri.node import Node
from tests.support.cri import CriClient, PodSpec, Stubs
from tests.support.evidence import Evidence
from tests.support.reported_stack import ReportedStack
from tests.support.runtimes import START_LINE, Runtime
from tests.support.waiting import wait_for

RUN_DEADLINE = 240  # the kubelet's RunPodSandbox deadline (4 minutes)
STOP_DEADLINE = 120  # its StopPodSandbox and RemovePodSandbox deadline (2 minutes)
BACKOFF = 10  # its pod worker's back-off after a failed sync (kubelet.go:222)
GC_PERIOD = 60  # its container GC's period (kubelet.go:228)
NAMESPACE = "delguard-e2e"
# kube-ovn's daemon down after the boot (kube-ovn-down-at-boot): 30 s. The window it opens is the
# pod's new ADD failing with code 11 ("RPC failed": the plugin cannot dial the socket) at every
# kubelet retry; nothing in the chain has a timer longer than the kubelet's 10 s back-off that the
# daemon's absence could trip (the plugin dials once, without retry; multus's daemon is up), so
# 30 s (three failed retries) shows everything a longer outage would, and the pod runs again at
# the first retry after the daemon is back.
KUBE_OVN_DOWN = 30
# multus's daemon (and kube-ovn's) down while a pod is deleted (multus-restart): 20 s, a
# DaemonSet pod's restart (Cozystack's multus: terminationGracePeriodSeconds 10, then the new
# container's start), two kubelet retries.
RESTART_WINDOW = 20
REBOOT_PODS = 20
CONF_SETTLE = 2.0  # seconds without a change in its conf dir before CRI-O's default is trusted
# CRI-O (ocicni) on any change of a file in its conf dir
CRIO_EVENT = r'CNI monitoring event \S+\s+\\?"[^"\\]*\\?"'
# What the runtime's errors said, counted by kind (Evidence.tally; Evidence is
# tests/support/evidence.py's, imported from here by the kubelet suite)
ERROR_KINDS = {
    "kube-ovn-rpc-failed": "RPC failed",  # kube-ovn's plugin could not reach its daemon (code 11)
    "kube-ovn-no-socket": "server_socket is required",  # multus handed it a config without it
    "shim-timed-out": "timed out waiting for the condition",  # the shim's readiness poll failed
    "cilium-agent-down": "unable to connect to Cilium agent",  # cilium-cni's ADD (code 999)
    "deadline": "DEADLINE_EXCEEDED",  # the caller's deadline (the kubelet's) passed first
    "name-reserved": "is reserved for",
}


class ReportedNode(Node):
    """A node with a network namespace of its own, as the kubelet suite's: the runtime, its
    plugins and the host ends of kube-ovn's veths live in it, never in the machine's."""

    net: ClassVar[bool] = True


@dataclass
class Site:
    """One node: its runtime, its CRI client, the stack, and what the runtime said."""

    node: Node
    client: CriClient
    stack: ReportedStack
    ev: Evidence

    # --- the runtime's conf ----------------------------------------------------------------------

    def conf_loaded(self, want: str) -> None:
        """Wait until the runtime's default CNI network is the conf whose first plugin's type is
        `want` ("kube-ovn": cilium's generic-veth list, run without multus in front):
        containerd's verbose Status shows the conf it loaded; CRI-O's log, ocicni's "Found CNI
        network NAME (type=TYPE) at PATH", the first after the last change it saw in the conf dir
        (or its start) being its default."""
        def containerd() -> bool:
            try:
                text = self.client.cni_config()
            except grpc.RpcError:
                return False
            if want == "kube-ovn":
                return "generic-veth" in text and "multus-shim" not in text
            if want == "multus-shim":
                return "multus-shim" in text and "cni-delguard" not in text
            return want in text

        settled: dict[int, float] = {}

        def crio() -> bool:
            # Settled too: no change in the conf dir for CONF_SETTLE s. multus writes its conf in
            # place (truncate, then write: two events); a RunPodSandbox between the reload of the
            # first, which may find the file empty and make kube-ovn's conflist the default, and
            # the reload of the second runs ADD under one network and reads the pod's status under
            # the other ("neither IPv4 nor IPv6 found": seen in 2 of 10 CRI-O runs at load 50).
            text = self.node.log_text()
            marks = [m.end() for m in re.finditer(CRIO_EVENT + "|" + START_LINE, text)]
            if not marks:
                return False
            found = re.search(r"Found CNI network \S+ \(type=([\w-]+)\)", text[marks[-1]:])
            since = settled.setdefault(marks[-1], time.monotonic())
            return found is not None and found.group(1) == want and \
                time.monotonic() - since >= CONF_SETTLE

        wait_for(crio if self.node.runtime.runtime == "cri-o" else containerd,
                 f"{self.node.runtime.key} to load the conf of {want}", timeout=60, every=0.2)

    # --- the kubelet's calls ---------------------------------------------------------------------

    def pod(self, name: str) -> PodSpec:
        spec = PodSpec(name, NAMESPACE, uid=f"uid-{name}")
        self.stack.put_pod(spec.namespace, spec.name, spec.uid)
        return spec

    def run(self, spec: PodSpec) -> str:
        sandbox = self.client.run_pod(spec, timeout=RUN_DEADLINE)
        state = self.client.state_name(self.client.pod_status(sandbox).state)
        assert state == "SANDBOX_READY", state
        return sandbox

    def call(self, what: Callable[[], object]) -> bool:
        try:
            what()
        except grpc.RpcError as exc:
            text = f"{exc.code().name}: {exc.details()}"
            for kind, words in ERROR_KINDS.items():
                if words in text:
                    self.ev.tally[kind] = self.ev.tally.get(kind, 0) + 1
            self.ev.errors.append(text[:1500])
            return False
        return True

    def listed(self, sandbox: str) -> bool:
        return sandbox in {p.id for p in self.client.list_pods()}

    def until(self, what: Callable[[], object], bound: float) -> bool:
        """Call `what` until it succeeds, every BACKOFF s (the kubelet's retry), within bound."""
        deadline = time.monotonic() + bound

        def attempt() -> str | None:
            if self.call(what):
                return "done"
            return "out of time" if time.monotonic() + BACKOFF > deadline else None

        # No attempt starts after the bound: the check gives up itself, the wait's own timeout
        # (a back-off later) is never reached.
        return wait_for(attempt, "a call to succeed, retried as the kubelet does",
                        timeout=bound + 2 * BACKOFF, every=BACKOFF) == "done"

    def stop_remove(self, sandbox: str, bound: float) -> bool:
        """StopPodSandbox, then RemovePodSandbox, each retried as the kubelet does within bound."""
        for call in (self.client.stop_pod, self.client.remove_pod):
            if not self.listed(sandbox):
                return True
            if not self.until(functools.partial(call, sandbox, timeout=STOP_DEADLINE), bound):
                return False
        return True

    def run_again(self, spec: PodSpec, bound: float) -> str | None:
        """RunPodSandbox retried as the kubelet does until the sandbox is Ready (its id), or None
        when the bound passed (the last error tells why: a reserved name, a failing ADD)."""
        got: list[str] = []
        self.until(lambda: got.append(self.run(spec)), bound)
        return got[0] if got else None

    # --- the counts ------------------------------------------------------------------------------

    def count(self, containers: set[str] | None = None) -> None:
        """The DELs that reached each daemon (for these sandboxes), the deletions cilium-cni
        queued while its agent was away (replayed at the agent's start), and the kube-ovn ports
        left behind by sandboxes that are gone (what a DEL that never reached kube-ovn's daemon
        leaves: its OVS port and IP)."""
        stack = self.stack
        live = {p.id for p in self.client.list_pods()}
        self.ev.facts["ports_leaked"] = len([p for p in stack.kube_ovn.held_ports()
                                             if p.split(":")[0] not in live])
        self.ev.facts["cilium_replayed"] = stack.cilium.replayed()
        if containers is None:
            self.ev.multus_dels = stack.multus_dels()
            self.ev.kube_ovn_dels = stack.kube_ovn_dels()
            self.ev.facts["cilium_dels"] = stack.cilium.deletes()
            return
        self.ev.multus_dels = sum(stack.multus_dels(c) for c in containers)
        self.ev.kube_ovn_dels = sum(stack.kube_ovn_dels(c) for c in containers)
        self.ev.facts["cilium_dels"] = sum(stack.cilium.deletes(c) for c in containers)


def elapsed(since: float) -> float:
    return round(time.monotonic() - since, 1)


@contextlib.contextmanager
def rebooted(site: Site, kube_ovn_after: float = 0,
             before_daemons: Callable[[], object] = lambda: None) -> Iterator[float]:
    """Power off and boot the node: its runtime back with the conf left on disk; then, after
    `before_daemons` (what the kubelet does before the DaemonSets' pods are up), the stack's
    daemons start in the background (kube-ovn's `kube_ovn_after` seconds later) while the body,
    the kubelet, goes on: it does not wait for them. Yields the boot's monotonic time; the
    daemons are up (or their start failed, which is raised) when it ends."""
    site.node.power_off()
    site.stack.node_down()
    booted = time.monotonic()
    site.node.boot()
    site.client.reconnect()
    site.conf_loaded(site.stack.final_conf())
    before_daemons()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="daemonsets") as pool:
        daemons = pool.submit(site.stack.node_up, site.node.enter, kube_ovn_after)
        try:
            yield booted
        finally:
            daemons.result()


def outcome_of(site: Site, old: str, spec: PodSpec, bound: float) -> str:
    """The old sandbox stopped and removed, then the pod run again under its name: removed, or
    stuck (the old one still listed, the name reserved for it, or the pod not running)."""
    if not site.stop_remove(old, bound) or site.listed(old):
        return "stuck"
    return "removed" if site.run_again(spec, bound) else "stuck"


# --- the scenarios -----------------------------------------------------------------------------


def double_del(site: Site) -> None:
    """A pod deleted normally: StopPodSandbox (DEL), RemovePodSandbox (DEL again where the runtime
    runs one), the pod run again. seconds: Stop to the new sandbox Ready."""
    spec = site.pod("dd")
    old = site.run(spec)
    since = time.monotonic()
    site.ev.outcome = outcome_of(site, old, spec, bound=60)
    site.ev.seconds = elapsed(since)
    site.count({old})


def reboot(site: Site) -> None:
    """The node loses power while the pod's ADD is in kube-ovn's daemon (its gateway check, which
    pings for up to 200 s: the longest wait of a kube-ovn ADD); it boots, and the
    kubelet's Stop and Remove of the stale sandbox come before the DaemonSets' pods are back (as
    tests/e2e_cri/matrix_scenarios.py's reboot); then the pod is run again. seconds: boot to
    Ready."""
    stack = site.stack
    stack.kube_ovn.mode(gateway_after=None)
    spec = site.pod("rb")
    pending = site.client.run_pod_future(spec, timeout=RUN_DEADLINE)
    hung = wait_for(lambda: stack.kube_ovn.requests("add"), "the ADD to reach kube-ovn's daemon",
                    timeout=120, every=0.2)
    stale = str(hung[0]["request"]["container_id"])
    wait_for(lambda: any(p.startswith(stale) for p in stack.kube_ovn.held_ports()),
             "its port made: the ADD in its gateway check", timeout=120, every=0.2)
    stack.kube_ovn.mode()  # its settings are on disk: healthy when it comes back
    removed: list[bool] = []
    with rebooted(site, before_daemons=lambda: removed.append(
            site.stop_remove(stale, bound=30))) as booted:
        try:
            pending.result()
        except grpc.RpcError:
            pass  # the runtime died under it
        if not removed[0] or site.listed(stale):
            site.ev.outcome = "stuck"
        else:
            site.ev.outcome = "removed" if site.run_again(spec, bound=90) else "stuck"
        site.ev.seconds = elapsed(booted)
    site.count({stale})


def kube_ovn_down_at_boot(site: Site) -> None:
    """A pod running; the node reboots; kube-ovn's daemon comes back KUBE_OVN_DOWN seconds after
    the others. The kubelet stops and removes the old sandbox and runs the pod again, each retried
    after its back-off. seconds: boot to Ready."""
    spec = site.pod("ko")
    old = site.run(spec)
    with rebooted(site, kube_ovn_after=KUBE_OVN_DOWN) as booted:
        site.ev.outcome = outcome_of(site, old, spec, bound=KUBE_OVN_DOWN + 90)
        site.ev.seconds = elapsed(booted)
    site.count({old})


def multus_restart(site: Site) -> None:
    """A pod running; multus's daemon and kube-ovn's go down together (a node's network pods
    restarting: multus removes its 00-multus.conf, so the runtime runs kube-ovn's conflist
    directly), the pod is deleted in that window, and both are back RESTART_WINDOW seconds later.
    seconds: the deletion to the pod Ready again."""
    stack = site.stack
    spec = site.pod("mr")
    old = site.run(spec)
    stack.kube_ovn.stop()
    stack.multus.stop_daemon()
    site.conf_loaded("kube-ovn")
    since = time.monotonic()

    def back() -> None:
        time.sleep(RESTART_WINDOW)
        stack.daemons_up(site.node.enter)

    restarting = threading.Thread(target=back, name="daemons-back")
    restarting.start()
    try:
        site.ev.outcome = outcome_of(site, old, spec, bound=RESTART_WINDOW + 90)
    finally:
        restarting.join()
    site.ev.seconds = elapsed(since)
    site.count({old})


def reboot_20_pods(site: Site) -> None:
    """REBOOT_PODS pods running; the node reboots; as the kubelet does at once for every pod:
    StopPodSandbox of its old sandbox, RunPodSandbox of a new one (the next attempt), each retried
    after the back-off, while the DaemonSets' pods come back; the GC removes the old sandboxes a
    period later. seconds: boot to every pod Ready; outcome: removed once every pod runs and every
    old sandbox is gone."""
    specs = [site.pod(f"p{i:02d}") for i in range(REBOOT_PODS)]
    olds = {spec.name: site.run(spec) for spec in specs}
    ready: dict[str, float] = {}

    def worker(spec: PodSpec, booted: float) -> None:
        old = olds[spec.name]
        if not site.until(lambda: site.client.stop_pod(old, timeout=STOP_DEADLINE), 300):
            return
        new = PodSpec(spec.name, spec.namespace, spec.uid, attempt=spec.attempt + 1)
        if site.run_again(new, 300):
            ready[spec.name] = elapsed(booted)

    with rebooted(site) as booted, ThreadPoolExecutor(max_workers=REBOOT_PODS) as pool:
        for f in [pool.submit(worker, s, booted) for s in specs]:
            f.result()
    site.ev.seconds = max(ready.values()) if len(ready) == len(specs) else elapsed(booted)
    gone = _gc(site, set(olds.values()), booted)
    site.ev.outcome = "removed" if len(ready) == len(specs) and gone else "stuck"
    site.count(set(olds.values()))
    site.ev.facts.update(ready=len(ready), ready_seconds=sorted(ready.values()),
                         multus_adds=site.stack.multus.requests("ADD"))


def _gc(site: Site, olds: set[str], booted: float) -> bool:
    """The kubelet's GC, once a period from the boot (its first pass at the kubelet's start finds
    every old sandbox still its pod's newest): RemovePodSandbox of each old sandbox, retried at
    each period while it fails (three periods at most)."""
    for period in (1, 2, 3):
        time.sleep(max(0.0, booted + period * GC_PERIOD - time.monotonic()))
        for sandbox in sorted(olds):
            if site.listed(sandbox):
                site.call(functools.partial(site.client.remove_pod, sandbox,
                                            timeout=STOP_DEADLINE))
        if not olds & {p.id for p in site.client.list_pods()}:
            return True
    return False


SCENARIOS: dict[str, Callable[[Site], None]] = {
    "double-del": double_del,
    "reboot": reboot,
    "kube-ovn-down-at-boot": kube_ovn_down_at_boot,
    "multus-restart": multus_restart,
    "reboot-20-pods": reboot_20_pods,
    "kube-ovn-lifetimes": reported_lifetimes.kube_ovn_lifetimes,
    **windows.SCENARIOS,
}


# --- one run -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    scenario: str
    runtime: Runtime
    multus: str  # multus's version: a row of peers/pins.tsv
    guard: bool
    minutes: float  # about how long it takes: the longest start first

    @property
    def id(self) -> str:
        return (f"{self.scenario}-{self.runtime.key}-multus-{self.multus}-"
                f"{'with' if self.guard else 'without'}-guard")


def run(spec: Run, stubs: Stubs, archive: Path) -> Evidence:
    """A fresh node for the run, the stack on it, the scenario, the row; torn down always."""
    stack_holder: list[ReportedStack] = []
    node = ReportedNode.create(spec.runtime)
    client: CriClient | None = None
    ev = Evidence(spec.scenario, spec.runtime.key, spec.runtime.version(), "", spec.guard)
    try:
        node.install_debian_plugins(("loopback", "portmap"))
        node.come_up(archive)
        client = CriClient(node.socket, stubs, node.cgroup_parent)
        wait_for(lambda: client is not None and client.image_known(pause_image.IMAGE_REF),
                 "CRI to see the pause image")
        stack = ReportedStack(spec.multus, spec.guard, node.name, node.cni_bin, node.cni_conf,
                              node.run, node.tmp / "stack")
        stack_holder.append(stack)
        ev.delegate = stack.delegate
        stack.start(node.enter)
        site = Site(node, client, stack, ev)
        site.conf_loaded(stack.final_conf())
        SCENARIOS[spec.scenario](site)
        ev.facts["multus_cpu_seconds"] = round(stack.multus_cpu(), 2)
        ev.facts["multus_ready_seconds"] = stack.multus.ready_seconds
        ev.facts["guard_decisions"] = _decisions(stack)
        ev.record(spec.runtime.runtime)
    finally:
        ev.save()
        if stack_holder:
            stack_holder[0].stop()
            _keep(stack_holder[0], node, ev)
        if client is not None:
            client.close()
        problems = node.teardown()
        assert not problems, f"node teardown left things behind: {problems}"
    return ev


def _keep(stack: ReportedStack, node: Node, ev: Evidence) -> None:
    """The run's logs beside its evidence (the node's dir goes at teardown): multus's daemon's,
    kube-ovn's daemon's record, cilium-agent's, the guard's decisions and its installer's output,
    the runtime's."""
    import shutil

    where = ev.save().with_suffix("")
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    for path in (stack.multus.log, stack.kube_ovn.record, stack.cilium.record, stack.guard_log,
                 stack.work / "installer.out", stack.work / "multus-daemon.out",
                 stack.work / "cilium-agent.out", node.log_path):
        if path.exists():
            shutil.copyfile(path, where / path.name)


def _decisions(stack: ReportedStack) -> dict[str, int]:
    """The guard's DEL decisions, counted (none without the guard)."""
    from collections import Counter

    from tests.support.records import guard_log

    if not stack.guard_log.exists():
        return {}
    return dict(Counter(str(r.get("decision")) for r in guard_log(stack.guard_log,
                                                                   command="DEL")))
