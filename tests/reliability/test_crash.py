"""SIGKILL the guard at every step of ADD and DEL, then check that the node can still recover.

Each crash point is hit deterministically, without touching the product: fanotify permission
events hold the guard inside open() of its lock file, its temp file or its log, or hold its forked
child inside execve() of the delegate (fangate.py); the gated fake delegate waits on a FIFO before
or after its work (tests/fakes/gated_delegate.py); "delegate returned" is SIGSTOP on the guard, let
the delegate exit into a zombie, then SIGKILL. The test first checks the crash left the on-disk
state that point implies (so it really was hit), then that:

- every delegate process the guard started is dead within DELEGATE_GRACE seconds,
- no marker is corrupt or half-written (temp files may stay until the next DEL),
- the next DEL succeeds, and leaves no marker, lock or temp file of the attachment behind,
- the delegate holds no state for the attachment afterwards, and a repeated DEL succeeds too.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.reliability import fangate
from tests.reliability.harness import Bench, Started, attachment_files, marker_problems
from tests.reliability.procs import Gates, kill_quietly, proc_state, wait_dead
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(fangate.available() is not None,
                                reason=str(fangate.available()))

CID = "crash1"
KEY = f"{CID}:eth0"
DELEGATE_GRACE = 2.0


@dataclass(frozen=True)
class Point:
    """Where the guard dies, and what must be on disk right after (to prove it was hit)."""

    command: str
    how: str  # "open", "exec", "log", "gate", "returned"
    arg: str  # file kind for "open" (lock/temp), gate point for "gate"/"returned"
    marker: str | None  # marker state on disk right after the crash
    temp: bool  # a temp file of the attachment is on disk right after the crash
    fake_state: bool  # the fake delegate holds state right after the crash
    nth: int = 1
    pre_gate: str = ""  # hold the fake here first, arm fanotify, then let it go on


POINTS = [
    pytest.param(Point("ADD", "open", "lock", None, False, False), id="add-before-attempted"),
    pytest.param(Point("ADD", "open", "temp", None, True, False), id="add-writing-attempted"),
    pytest.param(Point("ADD", "exec", "", "attempted", False, False), id="add-before-delegate"),
    pytest.param(Point("ADD", "gate", "start", "attempted", False, False),
                 id="add-delegate-starting"),
    pytest.param(Point("ADD", "gate", "done", "attempted", False, True), id="add-delegate-running"),
    pytest.param(Point("ADD", "returned", "done", "attempted", False, True),
                 id="add-delegate-returned"),
    # The delegate is spawned but gets its stdin only after its session is recorded: it cannot
    # have done anything yet (so no child of it can be missed by the next DEL's reaping).
    pytest.param(Point("ADD", "open", "temp", "attempted", True, False, nth=2),
                 id="add-recording-delegate-session"),
    pytest.param(Point("ADD", "open", "temp", "attempted", True, True, pre_gate="start"),
                 id="add-writing-completed"),
    pytest.param(Point("ADD", "log", "", "completed", False, True), id="add-before-reply"),
    pytest.param(Point("DEL", "open", "lock", "completed", False, True), id="del-before-lock"),
    # Before forwarding, DEL rewrites the marker to "deleting": a DEL killed after the delegate
    # did its work is then repeated leniently (a delegate failing DEL without state must not
    # bring the deadlock back).
    pytest.param(Point("DEL", "open", "temp", "completed", True, True), id="del-writing-deleting"),
    pytest.param(Point("DEL", "gate", "start", "deleting", False, True),
                 id="del-delegate-starting"),
    pytest.param(Point("DEL", "gate", "done", "deleting", False, False), id="del-delegate-done"),
    pytest.param(Point("DEL", "returned", "done", "deleting", False, False),
                 id="del-delegate-returned"),
    pytest.param(Point("DEL", "log", "", None, False, False), id="del-before-reply"),
]


def _temp_name(path: str) -> bool:
    return f"/.{KEY}.json." in path and path.endswith(".tmp")


def _open_match(arg: str) -> Callable[[str], bool]:
    if arg == "lock":
        return lambda path: path.endswith(f"/{KEY}.lock")
    return _temp_name


def _crash_via_fanotify(bench: Bench, point: Point, conf: dict[str, Any]) -> list[int]:
    """Hold the guard (or its child) in the kernel, SIGKILL the guard; the held pids."""
    if point.how == "exec":
        gate = fangate.FanGate(bench.bin_dir, lambda p: p.endswith("/gated"), exec_only=True)
    elif point.how == "log":
        gate = fangate.FanGate(bench.log_file.parent, lambda p: p == str(bench.log_file))
    else:
        bench.net_dir().mkdir(mode=0o700, parents=True, exist_ok=True)
        if point.pre_gate:
            guard = _start_past_session(bench, point, conf)
        gate = fangate.FanGate(bench.net_dir(), _open_match(point.arg), nth=point.nth)
    with gate:
        if point.pre_gate:
            Gates(bench.gate_dir).release(CID, point.command, point.pre_gate)
        else:
            guard = bench.start(point.command, conf, CID)
        held, _ = gate.wait()
        assert guard.kill() == -signal.SIGKILL
    return [held] if held != guard.pid else []


def _start_past_session(bench: Bench, point: Point, conf: dict[str, Any]) -> Started:
    """Start the guard with the fake held at `pre_gate`, once the attempted marker is final
    (the guard rewrites it with the delegate's session right after the spawn)."""
    import json

    conf = conf | {"delegate": conf["delegate"] | {"gates": [f"{point.command}:{point.pre_gate}"]}}
    guard = bench.start(point.command, conf, CID)
    Gates(bench.gate_dir).wait(CID, point.command, point.pre_gate)
    marker = bench.net_dir() / f"{KEY}.json"
    try:
        wait_for(lambda: "delegateSession" in json.loads(marker.read_text()), "session", 2)
    except AssertionError:
        pass  # a guard that records no session: the marker is final already
    return guard


def _crash_via_gate(bench: Bench, point: Point, conf: dict[str, Any]) -> list[int]:
    gates = Gates(bench.gate_dir)
    guard = bench.start(point.command, conf, CID)
    delegate = gates.wait(CID, point.command, point.arg)
    if point.how == "returned":
        _stop_after_delegate_exit(guard, gates, point, delegate)
    assert guard.kill() == -signal.SIGKILL
    return [delegate]


def _stop_after_delegate_exit(guard: Started, gates: Gates, point: Point, delegate: int) -> None:
    """SIGSTOP the guard, let the delegate finish: it becomes a zombie nobody reaps yet."""
    kill_quietly(guard.pid, signal.SIGSTOP)
    wait_for(lambda: proc_state(guard.pid) == "T", "guard stopped", 5)
    gates.release(CID, point.command, point.arg)
    wait_for(lambda: proc_state(delegate) == "Z", "delegate exited (zombie)", 10)


def crash(bench: Bench, point: Point, conf: dict[str, Any]) -> list[int]:
    if point.how in ("gate", "returned"):
        return _crash_via_gate(bench, point, conf)
    return _crash_via_fanotify(bench, point, conf)


def _on_disk(bench: Bench) -> tuple[str | None, bool]:
    names = attachment_files(bench.entries(), CID)
    marker = None
    if f"{KEY}.json" in names:
        import json

        marker = json.loads((bench.net_dir() / f"{KEY}.json").read_text())["state"]
    return marker, any(n.endswith(".tmp") for n in names)


def assert_recovers(bench: Bench, conf: dict[str, Any], delegates: list[int]) -> float:
    """The checks after every crash; returns how long the slowest delegate outlived the guard."""
    delegates = delegates + [r["pid"] for r in bench.records()]
    outlived = max((wait_dead(pid, DELEGATE_GRACE) for pid in delegates), default=0.0)
    assert marker_problems(bench.state_dir) == []
    first = bench.run("DEL", conf, CID)
    assert (first.rc, first.stdout) == (0, b""), first.describe()
    assert attachment_files(bench.entries(), CID) == [], "marker, lock or temp file left behind"
    assert not bench.fake_holds(CID), "the delegate still holds state for the attachment"
    again = bench.run("DEL", conf, CID)
    assert (again.rc, again.stdout) == (0, b""), again.describe()
    return outlived


def _params_with_del_modes() -> list[Any]:
    out = []
    for param in POINTS:
        point = param.values[0]
        for mode in ("fail", "succeed"):
            out.append(pytest.param(point, mode, id=f"{param.id}-{mode}-without-state"))
    return out


@pytest.mark.parametrize(("point", "del_mode"), _params_with_del_modes())
def test_sigkill_then_del_recovers(bench: Bench, point: Point, del_mode: str, figures: Any) -> None:
    gates = [f"{point.command}:{point.arg}"] if point.how in ("gate", "returned") else []
    conf = bench.conf(bench.gated(gates=gates, delWithoutState=del_mode))
    if point.command == "DEL":
        add = bench.run("ADD", bench.conf(bench.gated(delWithoutState=del_mode)), CID)
        assert add.rc == 0, add.describe()
    delegates = crash(bench, point, conf)
    assert _on_disk(bench) == (point.marker, point.temp), "the crash did not land where meant"
    assert bench.fake_holds(CID) == point.fake_state
    outlived = assert_recovers(bench, bench.conf(bench.gated(delWithoutState=del_mode)), delegates)
    figures.add("crash", delegates=len(delegates), delegate_outlived_s=round(outlived, 3))


def _child_of(bench: Bench) -> int:
    path = bench.gate_dir / f"{CID}.child.pid"
    wait_for(path.exists, "the delegate's child", 10)
    return int(path.read_text())


def test_delegate_children_do_not_outlive_the_guard_for_long(bench: Bench, figures: Any) -> None:
    """What the delegate started itself (multus running kube-ovn) must not live on: killed with
    the guard's process group, or at the latest by the next DEL before it forwards."""
    conf = bench.conf(bench.gated(gates=["ADD:done"], spawnChild=True))
    guard = bench.start("ADD", conf, CID)
    delegate = Gates(bench.gate_dir).wait(CID, "ADD", "done")
    child = _child_of(bench)
    assert proc_state(child) not in (None, "Z")
    assert guard.kill() == -signal.SIGKILL
    wait_dead(delegate, DELEGATE_GRACE)
    try:
        outlived, by = wait_dead(child, DELEGATE_GRACE), "guard-death"
    except AssertionError:
        outlived, by = -1.0, "next-del"
    run = bench.run("DEL", bench.conf(), CID)
    assert (run.rc, run.stdout) == (0, b""), run.describe()
    wait_dead(child, DELEGATE_GRACE)
    assert attachment_files(bench.entries(), CID) == []
    figures.add("delegate child", killed_by=by, outlived_s=round(outlived, 3))
