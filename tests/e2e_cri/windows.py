"""Two windows of the reported stack that no caller's deadline closes early, each measured without
and with the guard (tests/e2e_cri/reported.py's Site, stack and kubelet numbers):

- go-cni-stall: the runtime's CNI library holds a read lock for a whole plugin run, and every
  write, rename or remove in the conf dir reloads the config under the write lock (go-cni
  cni.go@v1.1.12 Setup/Remove/Status take RLock, Load takes Lock; containerd
  internal/cri/server/cni_conf_syncer.go@v2.1.6 syncLoop calls Load for every event but Create and
  Chmod). A Go RWMutex blocks new readers once a writer waits, so one slow ADD plus one change in
  the conf dir holds every other Setup, Remove and Status on the node until that ADD ends.
  containerd v1.6.38's pkg/cri/server/cni_conf_syncer.go and go-cni v1.1.6's locks are the same
  (its syncer only lacks 2.x's stop when the conf dir itself goes), so the row runs on 2.1 alone.
  The slow ADD is one the runtime runs through kube-ovn's conflist while multus's daemon is away:
  one in flight through the shim ends when the daemon exits (cmd/multus-daemon/main.go@v4.2.3
  returns once its config manager has removed the conf, without waiting for its requests).
- stale-conf-power-cut: after a power cut multus's 00-multus.conf is still on disk (its daemon
  removes it only on a clean exit), so the runtime runs multus-shim before multus's daemon is
  back; the shim polls the daemon's socket every 100 ms for 60 s, then fails the ADD with
  "CmdAdd (shim): timed out waiting for the condition" (multus pkg/server/api/api.go@v4.2.3
  WaitUntilAPIReady, shim.go CmdAdd). Its /healthz always answers, so only a missing or refusing
  socket produces that message.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING

from tests.support.records import read_jsonl
from tests.support.waiting import wait_for

if TYPE_CHECKING:
    from tests.e2e_cri.reported import Site

# The slow ADD: kube-ovn's gateway check pings for up to 200 s (kube-ovn v1.15.3
# pkg/daemon/ovs.go), under the kubelet's 240 s RunPodSandbox deadline.
SLOW_ADD = 200
# multus's daemon back this long after the boot: past the shim's 60 s poll (api.go@v4.2.3
# APIReadyPollTimeout), so the first ADD after the boot fails with its message, and one kubelet
# back-off (10 s) more, so the retry's poll finds the daemon.
MULTUS_BACK = 70
# A probe ends "at the same event" as the slow ADD when it ends within its own unstalled duration
# (measured in the same run, before the stall) plus the kubelet's 10 s retry period of the slow
# ADD's end: what the syncer's queued reloads (each reads the conf dir: milliseconds) and the
# probe's own work take after the lock frees. A stall of another cause (another reload waiting on
# a second plugin run, which the guard's re-wrap could add) lasts at least a plugin run.
SAME_EVENT_SLACK = 10
WATCH = 0.1  # seconds between looks at kube-ovn's daemon's record for its answer
# ... which a look on a loaded node sees up to this late (measured: 0.1 s at load 10): a probe may
# seem to end that much before it. Still far below the 190 s a stalled probe waits, so a probe that
# is not stalled (ending seconds after it began, long before the answer) fails the check.
SEEN_LATE = 1.0
# The rows where each window means something: (runtime key, multus version), the reported ones.
ROWS: dict[str, tuple[tuple[str, str], ...]] = {
    "go-cni-stall": (("containerd-2.1", "v4.2.3"),),
    "stale-conf-power-cut": (("containerd-2.1", "v4.2.3"),),
}


def _timed(what: Callable[[], object]) -> float:
    began = time.monotonic()
    what()
    return time.monotonic() - began


def go_cni_stall(site: Site) -> None:
    """multus's daemon restarts (its 00-multus.conf removed, the runtime runs kube-ovn's conflist
    directly); a pod's ADD in that window takes SLOW_ADD s at kube-ovn's daemon; multus's daemon
    comes back and writes its conf (with the guard, the installer wraps it again). Then, as the
    kubelet does for other pods: RunPodSandbox of a new pod, StopPodSandbox of a running one, and
    Status, each with its deadline and retried after its back-off. seconds: the longest wait."""
    from tests.e2e_cri import reported as r

    stack, client = site.stack, site.client
    victim = site.pod("gv")
    old = site.run(victim)
    baseline = {"setup": _timed(lambda: site.run(site.pod("gb"))),
                "remove": _timed(lambda: client.stop_pod(old, timeout=r.STOP_DEADLINE)),
                "status": _timed(lambda: client.cni_config(timeout=r.STOP_DEADLINE))}
    old = site.run(replace(victim, attempt=victim.attempt + 1))
    stack.multus.stop_daemon()
    site.conf_loaded("kube-ovn")
    stack.kube_ovn.mode(add="slow", delay=SLOW_ADD)
    slow_pod = site.pod("gs")
    slow_began = time.monotonic()
    slow = client.run_pod_future(slow_pod, timeout=r.RUN_DEADLINE)
    replied: list[float] = []
    slow.add_done_callback(lambda _f: replied.append(time.monotonic()))
    wait_for(lambda: _slow_add(site, slow_pod.name, "start"),
             "the slow ADD to reach kube-ovn's daemon", timeout=60, every=0.2)
    stack.kube_ovn.mode()  # only that one ADD is slow
    # The event the stall ends at: kube-ovn's daemon answering the slow ADD (the runtime's reply
    # comes later: the rest of the plugin list, then the sandbox's own start, run after it).
    ended: list[float] = []
    watcher = threading.Thread(target=lambda: ended.append(wait_for(
        lambda: _slow_add(site, slow_pod.name, "end") and time.monotonic(),
        "kube-ovn's daemon to answer the slow ADD", timeout=r.RUN_DEADLINE, every=WATCH)))
    watcher.start()
    stack.multus.start_in(stack.multus.node_enter)  # its conf written: a reload now waits
    if stack.installer is not None:
        stack.wait_wrapped()
    probes: dict[str, Callable[[], object]] = {
        "setup": lambda: site.run(site.pod("gp")),
        "remove": lambda: client.stop_pod(old, timeout=r.STOP_DEADLINE),
        "status": lambda: client.cni_config(timeout=r.STOP_DEADLINE),
    }
    waits = _probe(site, probes, bound=r.RUN_DEADLINE + r.BACKOFF)
    slow_ok = site.call(slow.result)
    watcher.join()
    assert ended, "kube-ovn's daemon never answered the slow ADD"
    after = {k: round(end - ended[0], 1) for k, (_, end) in waits.items() if end is not None}
    site.ev.facts.update(
        baseline={k: round(v, 1) for k, v in baseline.items()},
        waits={k: None if end is None else round(end - start, 1)
               for k, (start, end) in waits.items()},
        after_slow_add=after, slow_add_ok=slow_ok,
        slow_add_seconds=round(ended[0] - slow_began, 1),
        slow_add_reply_seconds=round(replied[0] - slow_began, 1),
        before_slow_add_end={k: round(ended[0] - start, 1) for k, (start, _) in waits.items()})
    done = slow_ok and len(after) == len(probes)
    site.ev.outcome = "running" if done else "not-running"
    site.ev.seconds = round(max((end - start for start, end in waits.values()
                                 if end is not None), default=0.0), 1)
    # The stall is real (the ADD was slow, and each probe began before its end and ended after
    # it), and it ends at that ADD's end, with the guard too.
    assert ended[0] - slow_began >= SLOW_ADD, site.ev.facts
    for kind, late in after.items():
        assert waits[kind][0] < ended[0], (kind, site.ev.facts)
        assert -SEEN_LATE <= late <= baseline[kind] + SAME_EVENT_SLACK, (kind, late,
                                                                          site.ev.facts)
    site.count()


def _slow_add(site: Site, pod: str, phase: str) -> bool:
    """Whether kube-ovn's daemon's record has this phase (start, end) of the pod's ADD."""
    return any(e["phase"] == phase and e.get("path") == "/api/v1/add"
               and e["request"].get("pod_name") == pod
               for e in read_jsonl(site.stack.kube_ovn.record))


def _probe(site: Site, probes: dict[str, Callable[[], object]],
           bound: float) -> dict[str, tuple[float, float | None]]:
    """Each probe started at once in its own thread, retried as the kubelet does: its start and
    the end of its first success (None when it never succeeded within bound)."""
    result: dict[str, tuple[float, float | None]] = {}

    def one(kind: str) -> None:
        start = time.monotonic()
        ok = site.until(probes[kind], bound)
        result[kind] = (start, time.monotonic() if ok else None)

    with ThreadPoolExecutor(max_workers=len(probes), thread_name_prefix="probe") as pool:
        for f in [pool.submit(one, kind) for kind in probes]:
            f.result()
    return result


def stale_conf_power_cut(site: Site) -> None:
    """A pod running; the power fails (00-multus.conf stays on disk); the node boots with
    kube-ovn's daemon (and the guard's installer) back at once and multus's daemon MULTUS_BACK s
    later. As the kubelet does: the old pod's StopPodSandbox then a new sandbox, and a pod new to
    the node, each retried after its back-off. seconds: boot to both Ready."""
    from tests.e2e_cri import reported as r

    stack = site.stack
    spec = site.pod("pc")
    old = site.run(spec)
    site.node.power_off()
    stack.node_down()
    booted = time.monotonic()
    site.node.boot()
    site.client.reconnect()
    site.conf_loaded(stack.final_conf())  # the stale conf, loaded from disk
    stack.node_up(site.node.enter, multus=False)  # multus's daemon comes back MULTUS_BACK s later
    ready: dict[str, float] = {}

    def old_pod() -> None:
        if site.stop_remove(old, bound=r.STOP_DEADLINE * 2) and site.run_again(
                replace(spec, attempt=spec.attempt + 1), bound=r.RUN_DEADLINE):
            ready["old"] = r.elapsed(booted)

    def new_pod() -> None:
        if site.run_again(site.pod("pn"), bound=r.RUN_DEADLINE):
            ready["new"] = r.elapsed(booted)

    def multus_back() -> None:
        time.sleep(max(0.0, booted + MULTUS_BACK - time.monotonic()))
        stack.multus.node_up(site.node.enter)

    threads = [threading.Thread(target=t, name=t.__name__)
               for t in (old_pod, new_pod, multus_back)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if stack.installer is not None:
        stack.wait_wrapped()
    site.ev.outcome = "running" if len(ready) == 2 else "not-running"
    site.ev.seconds = max(ready.values()) if len(ready) == 2 else r.elapsed(booted)
    site.ev.facts.update(ready_seconds=ready, multus_back=MULTUS_BACK)
    # The shim's message reproduced: the stale conf's ADD before multus's daemon was back.
    assert site.ev.tally.get("shim-timed-out"), site.ev.errors[:4]
    site.count()


SCENARIOS: dict[str, Callable[[Site], None]] = {
    "go-cni-stall": go_cni_stall,
    "stale-conf-power-cut": stale_conf_power_cut,
}
