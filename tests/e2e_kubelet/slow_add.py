"""Slow ADDs under a real kubelet: the guard must not fail an ADD the kubelet would still wait for.

The kubelet gives RunPodSandbox twice its runtime request timeout, 240 s by default, and
containerd runs the CNI ADD in that request's context (docs/how-it-decides.md, "Timeouts").
A delegate whose ADD completes after 150, 200 and 230 s (tests/fakes/slow_delegate.py: the
suite's fake-stateful delegate, its ADD timed as kube-ovn's can be) starts each pod
without the guard; with the guard in front, at its defaults as the installer writes it for a
kubelet at its defaults (no `timeouts` key: the guard's own), every pod that runs without it must
run too.

One node per runtime and guard (this suite's node.py: its own namespaces, containerd and
kubelet); the three pods of the three delays are put at once on that node, so a node's run takes
the longest ADD plus a pod start, not the sum. The verdict of each pod: "running" once the
kubelet reports it Ready, "not-running" when it is not Ready VERDICT_BOUND seconds after its
manifest (the kubelet's deadline, then a retry's start: a sandbox whose ADD was cut is made
again, and cut again, by the same delegate). seconds: the manifest to Ready.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e_cri import cri, pause_image
from tests.e2e_cri.scenario import NETWORK, Network, bridge_conf, guard_log, guard_state
from tests.e2e_kubelet.kubelet import VERSION, Kubelet, is_ready, plain_pod
from tests.e2e_kubelet.node import Node
from tests.e2e_kubelet.runtimes import RUNTIMES, Runtime
from tests.e2e_kubelet.site import Shared, elapsed, skip_or_fail
from tests.support import matrix, records
from tests.support.confs import guard_plugin, stale_delegate
from tests.support.evidence import keep
from tests.support.fakes import install_slow
from tests.support.waiting import wait_for

CHAIN = "fake-stateful"  # the matrix's name for the chain: the suite's, its ADD made slow
PLUGIN = "slow-delegate"
DELAYS = (150, 200, 230)  # seconds the fake's ADD takes, one pod each: all under 240
RUN_POD_SANDBOX = 240  # the kubelet's deadline at its default runtimeRequestTimeout (2m)
VERDICT_BOUND = RUN_POD_SANDBOX + 120  # then a pod start, under load, or a retry begun
CUT_WORDS = ("context deadline exceeded", "DeadlineExceeded", "signal: killed")


def pod_name(delay: int) -> str:
    return f"sa{delay}"


def scenario(delay: int) -> str:
    return f"slow-add-{delay}s"


@dataclass
class PodResult:
    delay: int
    outcome: str = ""
    seconds: float = 0.0  # the manifest to Ready (or to the bound)
    adds: int = 0  # ADDs the delegate began for the pod (more than 1: the first was cut)
    completed: int = 0  # ADDs that reached their end
    errors: list[str] = field(default_factory=list)  # the kubelet's lines about failed sandboxes


@dataclass
class Evidence:
    runtime: str
    version: str
    guard: bool
    pods: list[PodResult] = field(default_factory=list)
    guard_timeouts: list[str] = field(default_factory=list)  # the guard's log lines of a timeout
    rows: list[dict[str, Any]] = field(default_factory=list)

    def record(self) -> None:
        for pod in self.pods:
            row = matrix.Row(runtime="containerd", version=self.version, chain=CHAIN,
                             scenario=scenario(pod.delay), guard=self.guard,
                             outcome=pod.outcome, seconds=pod.seconds, driver="kubelet",
                             kubernetes=VERSION)
            matrix.record(row)
            self.rows.append(asdict(row))

    def save(self) -> Path:
        guard = "guard" if self.guard else "control"
        return keep("kubelet", f"slow-add-{self.runtime}-{guard}", asdict(self))


@dataclass
class DefaultsNetwork(Network):
    """The node's conflist with the guard as the installer writes it for a kubelet at its
    defaults: no `timeouts` key, so the guard's own defaults decide (the e2e_cri suites set a
    shorter ADD timeout of their own; this scenario is about the defaults)."""

    def conflist(self, plugins: list[dict[str, Any]]) -> dict[str, Any]:
        if self.guarded:
            plugins = [guard_plugin(plugins[0], state_dir=guard_state(self.node),
                                    log_file=guard_log(self.node), logLevel="debug"),
                       *plugins[1:]]
        self.generation += 1
        return {"cniVersion": self.cni_version, "name": NETWORK,
                "e2eGeneration": f"gen-{self.generation}", "plugins": plugins}


@dataclass
class Site:
    node: Node
    kubelet: Kubelet
    cri: cri.CriClient

    @property
    def record(self) -> Path:
        return self.node.tmp / "slow-record.jsonl"

    def fake_conf(self) -> dict[str, Any]:
        conf = stale_delegate(self.node.tmp / "fake-state", self.node.tmp / "fake-record.jsonl")
        return conf | {"type": PLUGIN, "slowRecordFile": str(self.record),
                       "addSeconds": {pod_name(d): d for d in DELAYS}}

    def calls(self, pod: str, phase: str) -> list[dict[str, Any]]:
        full = f"{pod}-{self.kubelet.node_name}"
        return [c for c in records.read_jsonl(self.record)
                if c["command"] == "ADD" and c["pod"] == full and c["phase"] == phase]


@contextlib.contextmanager
def site(runtime: Runtime, guarded: bool, shared: Shared) -> Iterator[Site]:
    node = Node.create_for(runtime)
    kubelet = Kubelet(node)
    client: cri.CriClient | None = None
    try:
        node.install_debian_plugins()
        install_slow(node.cni_bin, PLUGIN)
        node.come_up(shared.pause_archive)
        client = cri.CriClient(node.socket, shared.stubs, node.cgroup_parent)
        wait_for(lambda: client is not None and client.image_known(pause_image.IMAGE_REF),
                 "CRI to see the pause image")
        here = Site(node, kubelet, client)
        net = DefaultsNetwork(node, guarded)
        net.apply(client, [here.fake_conf(), bridge_conf(node)])
        kubelet.start()
        yield here
    finally:
        kubelet.kill()
        if client is not None:
            client.close()
        problems = node.teardown()
        assert not problems, f"node teardown left things behind: {problems}"


def slow_adds(here: Site, ev: Evidence) -> None:
    """The three pods at once; each one's verdict as it comes (see the module's docstring)."""
    since = time.monotonic()
    for delay in DELAYS:
        here.kubelet.put(pod_name(delay), plain_pod(pod_name(delay), pause_image.IMAGE_REF))
    results = {d: PodResult(d) for d in DELAYS}

    def settled() -> bool:
        late = time.monotonic() - since >= VERDICT_BOUND
        pods = {p["metadata"]["name"]: p for p in here.kubelet.pods()}  # one read for the three
        for delay, result in results.items():
            if result.outcome:
                continue
            if is_ready(pods.get(f"{pod_name(delay)}-{here.kubelet.node_name}")):
                result.outcome, result.seconds = "running", elapsed(since)
            elif late:
                result.outcome, result.seconds = "not-running", elapsed(since)
        return all(r.outcome for r in results.values())

    wait_for(settled, "every slow pod Ready, or its bound", timeout=VERDICT_BOUND + 60, every=3,
             detail=here.kubelet.log_tail)
    for delay, result in results.items():
        name = pod_name(delay)
        result.adds = len(here.calls(name, "start"))
        result.completed = len(here.calls(name, "end"))
        result.errors = [line[:700] for line in here.kubelet.log_lines(name, "RunPodSandbox")
                         if any(w in line for w in CUT_WORDS)][:2]
        ev.pods.append(result)
    if ev.guard:
        log = guard_log(here.node)
        lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
        ev.guard_timeouts = [line[:700] for line in lines if "timed out" in line][:3]


@dataclass(frozen=True)
class Run:
    scenario: str
    runtime: Runtime
    guard: bool
    minutes: int

    @property
    def id(self) -> str:
        return f"{self.runtime.key}-{'with' if self.guard else 'without'}-guard"


RUNS = [Run("slow-add", rt, guard, 6) for rt in RUNTIMES for guard in (False, True)]


def run(spec: Run, shared: Shared) -> Evidence:
    why = spec.runtime.missing()
    if why is not None:
        skip_or_fail(f"{spec.runtime.key}: {why}")
    ev = Evidence(spec.runtime.key, spec.runtime.version(), spec.guard)
    try:
        with site(spec.runtime, spec.guard, shared) as here:
            slow_adds(here, ev)
            ev.record()
    finally:
        ev.save()
    return ev
