"""Storms and races: a kubelet retry storm of stale DELs, many attachments at once, ADD vs DEL.

Every guard exec is a real process reaped with os.wait4, so each has a peak RSS. "Bounded memory"
here means: no exec above RSS_CAP_KB, and the slowest decile of the storm no bigger than the first
(no growth with the number of execs or of files in the state dir).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.reliability import fangate
from tests.reliability.harness import Bench, Run, attachment_files, marker_problems
from tests.reliability.procs import Gates
from tests.support.waiting import wait_for

PARALLEL = 16
STORM_DELS = 2000
ATTACHMENTS = 200
RACE_ROUNDS = 60
RSS_CAP_KB = 200 * 1024


def _pool(jobs: Iterable[Callable[[], Run]]) -> list[Run]:
    with ThreadPoolExecutor(PARALLEL) as pool:
        return list(pool.map(lambda job: job(), jobs))


def _failures(runs: list[Run], stdout: bytes | None = b"") -> list[str]:
    """Every run that did not exit 0 (with `stdout`, when given) or wrote to stderr."""
    return [r.describe() for r in runs
            if r.rc != 0 or (stdout is not None and r.stdout != stdout) or r.stderr]


def _rss(runs: list[Run]) -> dict[str, int]:
    rss = sorted(r.maxrss_kb for r in runs)
    return {"rss_median_kb": int(statistics.median(rss)), "rss_max_kb": rss[-1]}


def _assert_bounded(runs: list[Run]) -> None:
    rss = [r.maxrss_kb for r in runs]
    assert max(rss) < RSS_CAP_KB, f"an exec peaked at {max(rss)} kB"
    decile = max(1, len(rss) // 10)
    first, last = statistics.median(rss[:decile]), statistics.median(rss[-decile:])
    assert last <= first * 1.15, f"RSS grew over the storm: {first} kB -> {last} kB"


@pytest.mark.slow
def test_stale_del_storm(bench: Bench, figures: Any) -> None:
    """2000 DELs of attachments that never had an ADD, 16 at a time: all skip, none errs."""
    conf = bench.conf()
    cids = [f"stale{i % 1500:05d}" for i in range(STORM_DELS)]  # some DELs repeat, as retries do
    start = time.monotonic()
    runs = _pool(lambda cid=cid: bench.run("DEL", conf, cid) for cid in cids)
    wall = time.monotonic() - start
    assert _failures(runs) == []
    assert bench.records() == [], "the delegate was called for an attachment never added"
    assert not (bench.state_dir / "networks").exists(), "a stale DEL wrote to the state dir"
    decisions = Counter(line["decision"] for line in bench.log_lines())
    # Every decision is logged; past the network's log budget (guard/logbudget.py) in short
    # form, after one budget note per window.
    assert decisions["skip"] == STORM_DELS, "lost or torn log lines"
    assert set(decisions) <= {"skip", "log-budget"}, decisions
    _assert_bounded(runs)
    figures.add("stale DEL storm", dels=len(runs), parallel=PARALLEL, errors=0,
                wall_s=round(wall, 1), dels_per_s=round(len(runs) / wall), **_rss(runs),
                p99_ms=round(sorted(r.wall_s for r in runs)[int(len(runs) * 0.99)] * 1000))


def _markers(bench: Bench) -> dict[str, str]:
    ndir = bench.net_dir()
    if not ndir.is_dir():
        return {}
    return {p.name[: -len(":eth0.json")]: json.loads(p.read_text())["state"]
            for p in ndir.glob("*.json")}


@pytest.mark.slow
def test_many_attachments_add_and_del_at_once(bench: Bench, figures: Any) -> None:
    """200 attachments: half ADD at once; then the first half's DELs run interleaved with the
    second half's ADDs; then the second half is deleted, a sample of it twice (runtime retries)."""
    conf = bench.conf(bench.gated())
    half = ATTACHMENTS // 2
    first = [f"att{i:03d}" for i in range(half)]
    second = [f"btt{i:03d}" for i in range(half)]
    adds = _pool(lambda cid=cid: bench.run("ADD", conf, cid) for cid in first)
    assert _failures(adds, stdout=None) == []
    assert _markers(bench) == dict.fromkeys(first, "completed")
    mixed = [("DEL", c) for c in first] + [("ADD", c) for c in second]
    random.Random(7).shuffle(mixed)
    runs = _pool(lambda op=op: bench.run(op[0], conf, op[1]) for op in mixed)
    assert _failures(runs, stdout=None) == []
    assert _markers(bench) == dict.fromkeys(second, "completed"), "lost or stray markers"
    dels = _pool(lambda cid=cid: bench.run("DEL", conf, cid) for cid in second + second[::4])
    assert _failures(dels) == []
    assert bench.entries() == [], "markers, locks or temp files left behind"
    assert marker_problems(bench.state_dir) == []
    assert sorted(p.name for p in bench.fake_state.iterdir()) == []
    calls = Counter(r["command"] for r in bench.records())
    assert calls == {"ADD": ATTACHMENTS, "DEL": ATTACHMENTS}, "a DEL reached the delegate twice"
    every = adds + runs + dels
    assert max(r.maxrss_kb for r in every) < RSS_CAP_KB
    figures.add("attachments", attachments=ATTACHMENTS, execs=len(every), parallel=PARALLEL,
                errors=0, **_rss(every))


# -- ADD and DEL on the same attachment --------------------------------------------------------
CID = "race1"


def _assert_consistent(bench: Bench) -> str:
    """Either the ADD stands (completed marker and delegate state) or nothing is left at all."""
    names = attachment_files(bench.entries(), CID)
    if bench.fake_holds(CID):
        assert names in ([f"{CID}:eth0.json", f"{CID}:eth0.lock"], [f"{CID}:eth0.json"])
        assert _markers(bench)[CID] == "completed"
        return "add-stands"
    assert names == [], f"stray state: {names}"
    return "nothing-left"


def _clean_up(bench: Bench, conf: dict[str, Any]) -> None:
    run = bench.run("DEL", conf, CID)
    assert run.rc == 0, run.describe()
    assert attachment_files(bench.entries(), CID) == []
    assert not bench.fake_holds(CID)


def test_del_waits_for_an_add_in_progress(bench: Bench) -> None:
    """ADD first: its delegate is running when DEL comes; DEL waits, then deletes what ADD made."""
    gates = Gates(bench.gate_dir)
    add = bench.start("ADD", bench.conf(bench.gated(gates=["ADD:start"])), CID)
    gates.wait(CID, "ADD", "start")
    delete = bench.start("DEL", bench.conf(), CID)
    time.sleep(0.5)
    assert delete.proc.poll() is None, "DEL did not wait for the ADD holding the attachment"
    gates.release(CID, "ADD", "start")
    assert add.finish().rc == 0
    run = delete.finish()
    assert (run.rc, run.stdout) == (0, b""), run.describe()
    assert [r["command"] for r in bench.records()] == ["ADD", "DEL"]
    assert _assert_consistent(bench) == "nothing-left"


def test_add_waits_for_a_del_in_progress(bench: Bench) -> None:
    """DEL first: its delegate is running when a new ADD comes; ADD waits, then stands."""
    assert bench.run("ADD", bench.conf(), CID).rc == 0
    gates = Gates(bench.gate_dir)
    delete = bench.start("DEL", bench.conf(bench.gated(gates=["DEL:start"])), CID)
    gates.wait(CID, "DEL", "start")
    add = bench.start("ADD", bench.conf(), CID)
    time.sleep(0.5)
    assert add.proc.poll() is None, "ADD did not wait for the DEL holding the attachment"
    gates.release(CID, "DEL", "start")
    assert delete.finish().rc == 0
    run = add.finish()
    assert run.rc == 0, run.describe()
    assert [r["command"] for r in bench.records()] == ["ADD", "DEL", "ADD"]
    assert _assert_consistent(bench) == "add-stands"
    _clean_up(bench, bench.conf())


@pytest.mark.skipif(fangate.available() is not None, reason=str(fangate.available()))
def test_del_between_lock_and_attempted_marker_waits(bench: Bench) -> None:
    """The fast path's one window: ADD holds the lock but has no marker yet. DEL must not skip."""
    bench.net_dir().mkdir(mode=0o700, parents=True)
    with fangate.FanGate(bench.net_dir(), lambda p: p.endswith(".tmp")) as gate:
        add = bench.start("ADD", bench.conf(), CID)
        gate.wait()
        assert attachment_files(bench.entries(), CID)[-1] == f"{CID}:eth0.lock"
        delete = bench.start("DEL", bench.conf(), CID)
        time.sleep(0.5)
        assert delete.proc.poll() is None, "DEL skipped while an ADD held the attachment"
        gate.release()
        assert add.finish().rc == 0
    run = delete.finish()
    assert (run.rc, run.stdout) == (0, b""), run.describe()
    assert [r["command"] for r in bench.records()] == ["ADD", "DEL"]
    assert _assert_consistent(bench) == "nothing-left"


@pytest.mark.slow
def test_add_and_del_race_at_random(bench: Bench, figures: Any) -> None:
    """ADD and DEL of one attachment started together, in either order, many times."""
    rng = random.Random(11)
    conf = bench.conf()
    outcomes: Counter[str] = Counter()
    for _ in range(RACE_ROUNDS):
        order = ["ADD", "DEL"] if rng.random() < 0.5 else ["DEL", "ADD"]
        first = bench.start(order[0], conf, CID)
        time.sleep(rng.uniform(0, 0.15))
        second = bench.start(order[1], conf, CID)
        runs = [first.finish(), second.finish()]
        assert [r.rc for r in runs] == [0, 0], [r.describe() for r in runs]
        outcomes[f"{order[0]}-first:{_assert_consistent(bench)}"] += 1
        assert marker_problems(bench.state_dir) == []
        _clean_up(bench, conf)
    wait_for(lambda: bench.entries() == [], "state dir empty", 1)
    figures.add("ADD/DEL races", rounds=RACE_ROUNDS, errors=0,
                outcomes=dict(sorted(outcomes.items())))
