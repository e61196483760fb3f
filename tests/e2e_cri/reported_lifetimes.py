"""kube-ovn-lifetimes, a scenario of the reported stack (tests/e2e_cri/reported.py registers it):
how long kube-ovn's OVS port and the pod's IP really survive a pod deleted through multus in auto
mode, and a reboot.

Through multus v4.2.3 thick in auto mode kube-ovn's DEL never reaches its daemon (issue 1449:
`server_socket` dropped), so nothing but kube-ovn's own clean-up frees them (the stand-ins'
headers cite each at v1.15.3): the controller frees the pod's logical port, IP CR and address
when the pod is deleted; the daemon's gcInterfaces, every 60 s, removes a port whose veth is gone.
Phases, on one node:

1. a pod deleted: StopPodSandbox (the runtime's DEL, then the netns goes, and the veth with it),
   the pod object deleted (the kubelet does so once its containers are gone), RemovePodSandbox.
   Lifetimes from the Stop: the port's (until the GC pass that removes it), the IP's (until the
   controller's release).
2. a reboot with a pod running: its old sandbox's port, lifetime from the boot (OVSDB is on disk:
   the port outlives the power cut; the daemon's first GC pass at its start removes it); the IP is
   the pod's and stays with it (the new sandbox gets it again), until the pod is deleted as in 1.

outcome: removed when every IP of a deleted pod is gone within GONE_BOUND and every port of a
dead sandbox within GONE_BOUND of its veth's end (a veth alive past VETH_BOUND is recorded,
VETH_ALIVE, not counted), else stuck. seconds: the longest any of them survived. facts: each
lifetime.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.records import read_jsonl
from tests.support.reported_stack import node_netns
from tests.support.waiting import WaitTimeoutError, wait_for

if TYPE_CHECKING:
    from tests.e2e_cri.reported import Site

GC_PERIOD = 60  # kube-ovn's gcInterfaces (pkg/daemon/controller.go:866 at v1.15.3)
# Two GC periods and slack: a port whose veth is gone outlives one pass at most, and the next
# comes a period after the last one ended.
GONE_BOUND = 2 * GC_PERIOD + 30
# The pod's netns (and its veth) can outlive the sandbox: in 6 of 20 measurements here it lived
# more than 120 s past StopPodSandbox with no process thread or descriptor in it (the kernel
# frees a netns asynchronously; the machine's load was 15 to 30). kube-ovn keeps a port as long
# as its link is up, rightly, so its lifetime is measured from its veth's end too; a veth alive
# past VETH_BOUND is a fact of the run (VETH_ALIVE), not kube-ovn's failure.
VETH_BOUND = 300
VETH_ALIVE = "veth alive"


def port_removed(site: Site, sandbox: str) -> float | str | None:
    """When the sandbox's port was removed (the stand-in's record): waited for until its veth is
    gone (VETH_BOUND; VETH_ALIVE past it, with what holds the netns), then up to GONE_BOUND
    more; None when the port outlives its veth by more than that (kube-ovn's GC failing)."""
    def removed() -> float | None:
        for line in read_jsonl(site.stack.kube_ovn.record):
            if line.get("phase") == "port" and line.get("event") == "removed" \
                    and str(line.get("port", "")).startswith(sandbox + ":"):
                return float(line["t"])
        return None

    def veth_gone() -> float | None:
        return removed() or (None if veth_alive(site, sandbox) else time.time())

    try:
        gone = wait_for(veth_gone, f"the veth of {sandbox[:12]} to go", timeout=VETH_BOUND,
                        every=1)
    except WaitTimeoutError:
        site.ev.facts.setdefault("netns_held_by", {})[sandbox[:12]] = holders(site, sandbox)
        return VETH_ALIVE
    site.ev.facts.setdefault("veth_gone_at", {})[sandbox[:12]] = round(gone, 1)
    try:
        return wait_for(removed, f"the port of {sandbox[:12]} to go", timeout=GONE_BOUND,
                        every=0.5)
    except WaitTimeoutError:
        return None


def veth_alive(site: Site, sandbox: str) -> bool:
    """Whether the host end of the sandbox's veth is still in the node."""
    for path in site.stack.kube_ovn.ports.glob(f"{sandbox}:*"):
        host = str(json.loads(path.read_text(encoding="utf-8")).get("host_nic", ""))
        shown = subprocess.run(["nsenter", f"--net={node_netns(site.node.enter)}", "ip", "link",
                                "show", host], capture_output=True, check=False)
        if host and shown.returncode == 0:
            return True
    return False


def holders(site: Site, sandbox: str) -> list[str]:
    """What keeps a port's pod netns (so its veth) alive: every process with a thread in it, a
    descriptor on it or a mount of it in its mount namespace, as `pid comm`."""
    ino = None
    for path in site.stack.kube_ovn.ports.glob(f"{sandbox}:*"):
        ino = json.loads(path.read_text(encoding="utf-8")).get("netns_ino")
    if ino is None:
        return []
    found = set()
    want = f"net:[{ino}]"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            refs = [os.readlink(t / "ns" / "net") for t in (proc / "task").iterdir()]
            refs += [os.readlink(fd) for fd in (proc / "fd").iterdir()]
            mounted = want in (proc / "mountinfo").read_text()
            if want in refs or mounted:
                comm = (proc / "comm").read_text().strip()
                found.add(f"{proc.name} {comm}{' (a mount)' if mounted else ''}")
    return sorted(found)


def ip_released(site: Site, key: str) -> float | None:
    """When the controller released the pod's IP, waited for up to GONE_BOUND."""
    def released() -> float | None:
        done = [a.released for a in site.stack.kube_ovn_controller.allocations
                if a.key == key and a.released is not None]
        return done[0] if done else None

    try:
        return wait_for(released, f"the IP of {key} to go", timeout=GONE_BOUND, every=0.2)
    except WaitTimeoutError:
        return None


def delete_pod(site: Site, name: str, sandbox: str) -> float:
    """The kubelet's deletion of a running pod: Stop, the object deleted, Remove. Returns the
    Stop's wall time."""
    from tests.e2e_cri.reported import NAMESPACE, STOP_DEADLINE

    began = time.time()
    site.call(lambda: site.client.stop_pod(sandbox, timeout=STOP_DEADLINE))
    site.stack.api.delete_pod(NAMESPACE, name)
    site.call(lambda: site.client.remove_pod(sandbox, timeout=STOP_DEADLINE))
    return began


def lifetime(since: float, until: float | str | None) -> float | str | None:
    return round(until - since, 1) if isinstance(until, float) else until


def kube_ovn_lifetimes(site: Site) -> None:
    from tests.e2e_cri import reported  # it registers this scenario: imported when run

    facts = site.ev.facts
    spec = site.pod("lt")
    sandbox = site.run(spec)
    began = delete_pod(site, spec.name, sandbox)
    facts["deleted_ip_seconds"] = lifetime(began, ip_released(site, f"{spec.namespace}/lt"))
    facts["deleted_port_seconds"] = lifetime(began, port_removed(site, sandbox))

    spec = site.pod("lr")
    old = site.run(spec)
    with reported.rebooted(site) as boot:
        booted = time.time() - (time.monotonic() - boot)  # the boot, on the wall clock
        again = reported.outcome_of(site, old, spec, bound=120) == "removed"
    facts["reboot_port_seconds"] = lifetime(booted, port_removed(site, old))
    held = [a for a in site.stack.kube_ovn_controller.held() if a.key.endswith("/lr")]
    facts["reboot_ip_kept_by_the_pod"] = len(held) == 1
    new = [p.id for p in site.client.list_pods() if p.id != old]
    after: list[float | str | None] = []
    if again and new:
        began = delete_pod(site, spec.name, new[0])
        facts["reboot_then_deleted_ip_seconds"] = lifetime(
            began, ip_released(site, f"{spec.namespace}/lr"))
        facts["reboot_then_deleted_port_seconds"] = lifetime(began, port_removed(site, new[0]))
        after = [facts["reboot_then_deleted_ip_seconds"],
                 facts["reboot_then_deleted_port_seconds"]]
    lives = [facts["deleted_ip_seconds"], facts["deleted_port_seconds"],
             facts["reboot_port_seconds"], *after]
    gone = again and bool(new) and None not in lives
    site.ev.outcome = "removed" if gone else "stuck"
    site.ev.seconds = max((s for s in lives if isinstance(s, float)), default=0.0)
    site.count({sandbox, old, *new})
