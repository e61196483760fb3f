"""The kubelet scenarios of issue 26, each run on one node (site.py) with or without the guard.

A scenario drives the node the way a user's node is driven (manifests in, manifests out, a power
cut) and then only watches: what the kubelet does next is the kubelet's own logic. It ends with a
verdict and the evidence for it (Evidence), and records its rows in the matrix (driver
"kubelet"). The tests (test_kubelet.py) assert on the evidence.

Verdicts, the matrix's words:
- "removed": every stale sandbox is gone (and every pod that should run is Ready);
- "stuck": a stale sandbox is still there after STORM_PERIODS of the kubelet's GC periods,
  counted from the moment the kubelet had it to remove, with the runtime's failures in the
  kubelet's log, and, where the GC is what fails on it, after as many failed GC passes
  (kubelet.gc_verdict); "released": removed after `cni-delguard release`.
A scenario waits for one verdict or the other, never for a fixed time.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e_kubelet import installer_pod
from tests.e2e_kubelet.kubelet import (
    DESTROY_FAILED,
    GC_PERIOD,
    GC_STOP_FAILED,
    NEWEST,
    STORM_PERIODS,
    VERSION,
    is_ready,
    wait_gc_verdict,
)
from tests.e2e_kubelet.runtimes import RUNTIMES, Runtime
from tests.e2e_kubelet.site import (
    DELEGATE,
    READY_BOUND,
    Shared,
    Site,
    elapsed,
    site,
    skip_or_fail,
)
from tests.support import records
from tests.support.evidence import QUOTE, KubeletEvidence, quote
from tests.support.guard import guard_argv
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
VERDICT_BOUND = GC_PERIOD * (STORM_PERIODS + 3)  # a verdict comes well before this
STALE_DEL = "server_socket is required in cni.conf"  # the fake's answer to a DEL without state


class Evidence(KubeletEvidence):
    """What one run saw: its verdict and the facts the tests check and the report quotes."""

    chain = DELEGATE
    release = VERSION


def wait_verdict(site: Site, gone: Callable[[], bool], subjects: set[str],
                 since: float) -> str:
    """kubelet.gc_verdict on this node, polled until it has one."""
    return wait_gc_verdict(site.kubelet, site.sandbox_ids, gone, subjects, since,
                           timeout=VERDICT_BOUND, every=2)


def gather(site: Site, subjects: set[str]) -> dict[str, Any]:
    """The delegate's DELs, the GC's failures and the quoted lines about the subjects."""
    found: dict[str, Any] = {
        "dels": sum(len(site.fake.calls("DEL", sid)) for sid in subjects),
        "gc_failures": sum(len(site.kubelet.log_lines(sid, GC_STOP_FAILED)) for sid in subjects),
        "kubelet": [], "containerd": [],
    }
    for sid in sorted(subjects):
        found["kubelet"] += quote(site.kubelet.log_lines(sid, DESTROY_FAILED))
        found["containerd"] += quote(site.containerd_lines(sid, DESTROY_FAILED))
    return found


def settle(ev: Evidence, found: dict[str, Any]) -> None:
    """The run's own counts and quotes are those of its one subject."""
    ev.dels, ev.gc_failures = found["dels"], found["gc_failures"]
    ev.kubelet, ev.containerd = found["kubelet"], found["containerd"]


# --- 1. a static pod deleted normally ---------------------------------------------------------


def double_del(site: Site, ev: Evidence) -> None:
    """The manifest removed: the kubelet stops the sandbox (DEL 1, the delegate forgets its
    state), then its GC removes it (DEL again). seconds: manifest removed to the verdict."""
    site.start_pod("dd")
    site.wait_ready("dd")
    [sandbox] = site.sandboxes("dd")
    since = time.monotonic()
    site.kubelet.delete("dd")
    wait_for(lambda: site.fake.calls("DEL", sandbox.id), "the kubelet's StopPodSandbox DEL",
             timeout=VERDICT_BOUND, every=0.5, detail=site.kubelet.log_tail)
    ev.outcome = wait_verdict(site, lambda: sandbox.id not in site.sandbox_ids(), {sandbox.id},
                              since)
    ev.seconds = elapsed(since)
    settle(ev, gather(site, {sandbox.id}))
    ev.record("double-del", ev.guard, ev.outcome, ev.seconds)


# --- 2. a hard reboot while pods are being created --------------------------------------------

REBOOT_PODS = ("rb0", "rb1")


def reboot(site: Site, ev: Evidence) -> None:
    """Every pod's ADD hangs; the node loses power (kubelet, runtime, shims and plugins
    SIGKILLed, netns mounts and /run gone); it boots with the delegate healthy again.
    seconds: the kubelet's start after the boot to the verdict."""
    site.net.apply(site.cri, site.chain(hang=["ADD"]))
    for name in REBOOT_PODS:
        site.start_pod(name)
    hung = wait_for(lambda: _hung_adds(site), "every pod's ADD to hang",
                    timeout=READY_BOUND, every=0.5, detail=site.kubelet.log_tail)
    site.node.power_off()
    site.kubelet.reap()
    site.net.write(site.chain())
    site.boot()
    since = time.monotonic()
    restored = hung & site.sandbox_ids()
    ev.facts["stale_after_boot"] = len(restored)

    def gone() -> bool:
        ready = all(is_ready(site.kubelet.pod(n)) for n in REBOOT_PODS)
        return ready and not hung & site.sandbox_ids()

    ev.outcome = wait_verdict(site, gone, hung, since)
    ev.seconds = elapsed(since)
    ev.facts["ready"] = sorted(n for n in REBOOT_PODS if is_ready(site.kubelet.pod(n)))
    settle(ev, gather(site, hung))
    ev.record("reboot", ev.guard, ev.outcome, ev.seconds)


def _hung_adds(site: Site) -> set[str] | None:
    started = {c["containerID"] for c in site.fake.calls("ADD")}
    return started if len(started) >= len(REBOOT_PODS) else None


# --- 3. a completed ADD whose DEL keeps failing -----------------------------------------------

DOCTOR_BOUND = 900  # doctor names a strict DEL failing for 10 minutes (ops/stuck.py), then some


def completed_del_fails(site: Site, ev: Evidence) -> None:
    """The pod runs (ADD completed), then every DEL of the delegate fails; the manifest goes.
    With the guard, after the stuck verdict: `doctor` until it names the pod, the `release`
    command it prints, and the kubelet's next GC. seconds: manifest removed to each verdict."""
    site.start_pod("cf")
    site.wait_ready("cf")
    [sandbox] = site.sandboxes("cf")
    site.net.apply(site.cri, site.chain(failDel=11))
    since = time.monotonic()
    site.kubelet.delete("cf")
    subjects = {sandbox.id}
    ev.outcome = wait_verdict(site, lambda: sandbox.id not in site.sandbox_ids(), subjects,
                              since)
    ev.seconds = elapsed(since)
    settle(ev, gather(site, subjects))
    ev.record("completed-del-fails", ev.guard, ev.outcome, ev.seconds)
    if not ev.guard or ev.outcome != "stuck":
        return
    command = wait_for(lambda: _doctor_release(site, sandbox.id), "doctor to name the pod",
                       timeout=DOCTOR_BOUND, every=30)
    ev.facts["doctor"] = command
    done = _in_node(site, [*guard_argv(), *command[1:]])  # as doctor printed it
    ev.facts["release"] = done.stdout.strip()[:QUOTE]
    assert done.returncode == 0, done.stderr
    released_at = time.monotonic()
    wait_for(lambda: sandbox.id not in site.sandbox_ids(), "the kubelet's GC to remove it",
             timeout=GC_PERIOD * 3, every=2, detail=site.kubelet.log_tail)
    ev.facts["removed_after_release"] = elapsed(released_at)
    ev.facts["released_lines"] = [
        line for line in site.node.tmp.joinpath("delguard.log").read_text().splitlines()
        if '"released"' in line and sandbox.id in line][:1]
    ev.record("release", True, "released", elapsed(since))


def _in_node(site: Site, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run argv inside the node (its mount namespace: its CNI dirs, caches and log)."""
    return subprocess.run([*site.node.enter_all, *argv], capture_output=True, text=True,
                          timeout=120, check=False,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


def _doctor_release(site: Site, sandbox: str) -> list[str] | None:
    """The `cni-delguard release ...` command doctor prints for the sandbox, once it does."""
    out = _in_node(site, [*guard_argv(), "doctor", "--json"])
    for finding in json.loads(out.stdout).get("findings", []):
        text = str(finding.get("message", ""))
        if sandbox in text and "cni-delguard release" in text:
            return shlex.split(text[text.index("cni-delguard release"):])
    return None


# --- 4. the installer as the kubelet runs it --------------------------------------------------


def installer(site: Site, ev: Evidence) -> None:
    """The DaemonSet's pod template as a static pod (installer_pod.py) wraps the conflist;
    a pod created afterwards goes through the guard and, deleted, is removed (with the guard);
    the uninstall overlay's template puts the conf back byte for byte, and a pod created after
    that, deleted, is stuck again (without). seconds: each deletion to its verdict."""
    conf = site.node.cni_conf / "10-e2e.conflist"
    original = conf.read_bytes()
    image = installer_pod.import_image(site, site.shared.installer_image.get())
    site.kubelet.put(INSTALLER, installer_pod.static_pod("watch", image,
                                                         wrap=site.fake.conf()["type"]))
    watcher = wait_ready_uid(site, INSTALLER, old=None)
    ev.facts["seccomp"] = _installer_seccomp(site)
    ev.facts["probe"] = quote(site.kubelet.log_lines("Probe succeeded", 'probeType="Readiness"',
                                                     INSTALLER), 1)
    ev.facts["wrapped"] = '"type": "cni-delguard"' in conf.read_text()
    sandbox, ev.outcome, ev.seconds, found = _delete_after(site, "ig")
    settle(ev, found)
    ev.facts["guard_saw_add"] = bool(_guard_lines(site, "ADD", sandbox))
    ev.record("installer", True, ev.outcome, ev.seconds)

    site.kubelet.put(INSTALLER, installer_pod.static_pod("uninstall", image))
    wait_ready_uid(site, INSTALLER, old=watcher)
    site.kubelet.delete(INSTALLER)
    wait_for(lambda: site.kubelet.pod(INSTALLER) is None, "the uninstaller pod to go",
             timeout=READY_BOUND, every=1, detail=site.kubelet.log_tail)
    ev.facts["restored"] = conf.read_bytes() == original
    _, outcome, seconds, found = _delete_after(site, "iu")
    ev.facts["after_uninstall"] = {"outcome": outcome, "dels": found["dels"],
                                   "gc_failures": found["gc_failures"]}
    ev.record("installer", False, outcome, seconds)


INSTALLER = "cni-delguard"  # the DaemonSet's name, the static pod's manifest


def _installer_seccomp(site: Site) -> list[str]:
    """The `Seccomp:` mode (0 none, 2 a filter) of each process of the watching installer in
    this node's cgroups (its cgroup root is named after the node): what seccompProfile
    RuntimeDefault gives it under this runtime."""
    modes = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
            cgroups = (entry / "cgroup").read_text()
            status = (entry / "status").read_text()
        except (OSError, ValueError):
            continue
        if b"install\0--watch\0" in cmdline and f"/{site.kubelet.node_name}/" in cgroups:
            modes += [line.split()[1] for line in status.splitlines()
                      if line.startswith("Seccomp:")]
    return modes


def wait_ready_uid(site: Site, name: str, old: str | None) -> str:
    """The uid of the pod from manifest `name` once it is Ready and is not the pod `old` (a
    changed manifest is a new pod: the kubelet kills the old one and starts it)."""
    def ready() -> str | None:
        pod = site.kubelet.pod(name, other_than=old)
        return str(pod["metadata"]["uid"]) if is_ready(pod) and pod else None

    return wait_for(ready, f"pod {name} Ready", timeout=READY_BOUND, every=1,
                    detail=site.kubelet.log_tail)


def _delete_after(site: Site, name: str) -> tuple[str, str, float, dict[str, Any]]:
    """A pod started now, then deleted: its sandbox, the verdict, its seconds, gather()."""
    site.start_pod(name)
    site.wait_ready(name)
    [sandbox] = site.sandboxes(name)
    since = time.monotonic()
    site.kubelet.delete(name)
    outcome = wait_verdict(site, lambda: sandbox.id not in site.sandbox_ids(), {sandbox.id},
                           since)
    return sandbox.id, outcome, elapsed(since), gather(site, {sandbox.id})


def _guard_lines(site: Site, command: str, container: str) -> list[dict[str, Any]]:
    """The decision log of the guard the installer put on the node (its default log)."""
    log = site.node.var_log / "cni-delguard" / "delguard.log"
    return records.guard_log(log, command=command, containerID=container)


# --- the runs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    scenario: str
    runtime: Runtime
    guard: bool
    run: Callable[[Site, Evidence], None]
    minutes: int  # about how long it takes: the longest start first
    kubernetes: str = VERSION  # the kubelet row it runs

    @property
    def id(self) -> str:
        minor = "" if self.kubernetes == VERSION else f"-kubernetes-{self.kubernetes}"
        return f"{self.runtime.key}-{'with' if self.guard else 'without'}-guard{minor}"


def _runs() -> list[Run]:
    table: list[Run] = []
    for rt in RUNTIMES:
        for guard in (False, True):
            table += [Run("double-del", rt, guard, double_del, 2 if guard else 5),
                      Run("reboot", rt, guard, reboot, 3 if guard else 5),
                      Run("completed-del-fails", rt, guard, completed_del_fails,
                          13 if guard else 5)]
        # The installer takes the guard on and off again: one node, both rows.
        table.append(Run("installer", rt, True, installer, 9))
    # The newest minor: the scenarios whose verdict is the kubelet's own doing (its GC's DELs
    # of a deleted pod's sandbox and of a reboot's stale ones), on both runtimes, with and
    # without the guard. The rest (the release valve, the installer's pod, slow ADDs, the
    # reported stack) turn on the guard or the runtime, not on the kubelet's release, and run
    # on VERSION only: eight runs of 2 to 5 minutes, not 26 more, in a lane of 14.
    for rt in RUNTIMES:
        for guard in (False, True):
            table += [Run("double-del", rt, guard, double_del, 2 if guard else 5, NEWEST),
                      Run("reboot", rt, guard, reboot, 3 if guard else 5, NEWEST)]
    return table


RUNS = _runs()


def run(spec: Run, shared: Shared) -> Evidence:

    why = spec.runtime.missing()
    if why is not None:
        skip_or_fail(f"{spec.runtime.key}: {why}")
    ev = Evidence(spec.scenario, spec.runtime.key, spec.runtime.version(), spec.guard,
                  kubernetes=spec.kubernetes)
    guarded = spec.guard and spec.scenario != "installer"  # the installer wraps by itself
    try:
        with site(spec.runtime, guarded, shared, spec.kubernetes) as here:
            spec.run(here, ev)
    finally:
        ev.save()
    return ev


def workers() -> int:
    """Nodes run at once (DELGUARD_KUBELET_NODES): each is a containerd and a kubelet, mostly
    waiting for the GC; 7 lets this module's 14 runs end in two waves behind the longest one
    (reported.py adds 4 of about 4 minutes each; the whole pool was not timed with them)."""
    return max(1, int(os.environ.get("DELGUARD_KUBELET_NODES", "7")))
