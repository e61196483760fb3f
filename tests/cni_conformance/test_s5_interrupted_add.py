"""Scenario 5: an ADD interrupted mid-way.

Either the guard is SIGKILLed (a runtime's timeout) while its delegate is still running, after the
delegate set things up, or the delegate itself is killed. Either way the next DEL succeeds and
cleans what the delegate had set up: the veth, the lease and the rules of the real bridge, or the
fake's state file. A DEL must also not race a delegate ADD that outlives the killed guard.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cni_conformance.checks import assert_detached, ok
from tests.cni_conformance.lab import REFERENCE_VERSIONS, VERSIONS, Lab
from tests.support.cnitool import container_id
from tests.support.netns import Netns
from tests.support.recorder import read_records
from tests.support.waiting import wait_for, wait_gone

pytestmark = pytest.mark.netns
SCENARIO = "5 interrupted add"


def until(what: str, cond: Callable[[], bool], proc: subprocess.Popen[bytes]) -> None:
    """Wait for cond (tests/support/waiting.py), failing at once if the guard exits first."""

    def check() -> bool:
        if proc.poll() is not None:
            out = proc.communicate()
            pytest.fail(f"the guard exited ({proc.returncode}) before {what}: {out!r}")
        return cond()

    wait_for(check, what, 60, every=0.05)


def start_add(lab: Lab, conf: dict[str, Any], inner: Netns) -> subprocess.Popen[bytes]:
    stdin = dict(conf["plugins"][0], name=conf["name"], cniVersion=conf["cniVersion"])
    env = lab.execer.env("ADD", container_id(inner.path), str(inner.path), "eth0")
    proc = lab.execer.start("cni-delguard", env, stdin)
    lab.pids.append(proc.pid)
    return proc


def kill_guard(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the guard and reap it, without waiting for EOF on its pipes: a delegate that
    outlives it inherited its stderr and would hold them open."""
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def fake_add_pids(lab: Lab) -> list[int]:
    return [int(c["pid"]) for c in lab.fake_calls("ADD")]


def state_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir()) if path.exists() else []


@pytest.mark.parametrize("version", REFERENCE_VERSIONS)
def test_guard_killed_while_bridge_runs(lab: Lab, version: str) -> None:
    record = lab.recorder("rec-bridge", "bridge", hang_after_add=True)
    bridge = lab.bridge("rec-bridge")
    conf = lab.conflist(version, [lab.guard(bridge)])
    net, inner = conf["name"], lab.nets.new("i")

    proc = start_add(lab, conf, inner)
    until("the bridge's ADD", lambda: bool(read_records(record, "hang")), proc)
    lab.pids.extend(int(e["pid"]) for e in read_records(record, "hang"))
    assert "eth0" in inner.links() and lab.leases(net), "the delegate set nothing up"
    kill_guard(proc)
    assert lab.markers(net) == {lab.key(inner.path): "attempted"}

    ok(lab.runner(conf).delete(inner.path), "del after the guard was killed mid-ADD")
    assert_detached(lab, inner, net, bridge["bridge"])
    assert len(lab.calls(record, "DEL")) == 1
    assert lab.state_files() == []


@pytest.mark.parametrize("version", VERSIONS)
def test_guard_killed_while_fake_runs(lab: Lab, version: str) -> None:
    fake = lab.fake(hang=["ADD"], addHangAfterState=True, hangSeconds=120)
    conf = lab.conflist(version, [lab.guard(fake)])
    net, inner = conf["name"], lab.nets.new("i")

    proc = start_add(lab, conf, inner)
    until("the fake's state file", lambda: bool(state_files(lab.fake_state)), proc)
    lab.pids.extend(fake_add_pids(lab))
    kill_guard(proc)

    ok(lab.runner(conf).delete(inner.path), "del after the guard was killed mid-ADD")
    assert state_files(lab.fake_state) == [], "the delegate's state was not cleaned"
    assert len(lab.fake_calls("DEL")) == 1
    assert lab.markers(net) == {}
    assert lab.state_files() == []


@pytest.mark.parametrize("version", VERSIONS)
def test_delegate_killed_mid_add(lab: Lab, version: str) -> None:
    fake = lab.fake(hang=["ADD"], addHangAfterState=True, hangSeconds=120)
    conf = lab.conflist(version, [lab.guard(fake)])
    inner = lab.nets.new("i")

    proc = start_add(lab, conf, inner)
    until("the fake's state file", lambda: bool(state_files(lab.fake_state)), proc)
    pids = fake_add_pids(lab)
    lab.pids.extend(pids)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0, f"ADD succeeded though its delegate was killed: {out!r}"

    ok(lab.runner(conf).delete(inner.path), "del after the delegate was killed mid-ADD")
    assert state_files(lab.fake_state) == [], "the delegate's state was not cleaned"
    assert lab.state_files() == []


# grandchild: the delegate's own child outlives PR_SET_PDEATHSIG; the DEL kills it (reap.py).
@pytest.mark.parametrize("depth", ["child", "grandchild"])
@pytest.mark.parametrize("version", VERSIONS)
def test_del_does_not_race_the_orphaned_delegate(lab: Lab, version: str, depth: str) -> None:
    """The guard is killed while its delegate is still inside ADD, before setting anything up.

    A DEL arriving then must not run alongside that ADD (BACKGROUND: locks guard against a
    runtime that SIGKILLs a plugin and leaves its delegate running): it may wait, answer 11 (try
    again later) until the delegate is done, or the delegate may die with the guard. What must
    not happen: DEL succeeds at once, the orphaned ADD finishes afterwards and leaves state that
    no later DEL cleans (the marker is gone, so later DELs are skipped for lack of evidence).
    "grandchild": the work is done by a child of the delegate, as multus runs its delegates.
    """
    fake = lab.fake(hang=["ADD"], hangSeconds=3)
    if depth == "grandchild":
        lab.recorder("rec-fake", "stale-delegate")
        fake["type"] = "rec-fake"
    conf = lab.conflist(version, [lab.guard(fake, lockTimeout=1)])
    inner, runner = lab.nets.new("i"), lab.runner(conf)

    proc = start_add(lab, conf, inner)
    until("the delegate's ADD", lambda: bool(fake_add_pids(lab)), proc)
    [orphan] = fake_add_pids(lab)
    lab.pids.append(orphan)
    kill_guard(proc)

    def deleted() -> bool:
        out = runner.delete(inner.path)
        assert out.rc == 0 or '"code": 11' in out.stdout or "try again" in out.stderr.lower(), \
            out.describe()
        return out.rc == 0

    wait_for(deleted, "a DEL to succeed (retried while it says try again)", 60, every=0.5)
    wait_gone([orphan], f"the orphaned delegate {orphan} to exit", 60)
    leaked = state_files(lab.fake_state)
    ok(runner.delete(inner.path), "a later DEL")
    assert leaked == [], f"DEL succeeded while the delegate's ADD ran; it then leaked {leaked}"
