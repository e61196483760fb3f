"""SIGKILL the guard at random instants of ADD and of DEL, many times, and recover every time.

The deterministic crash points (test_crash.py) cover each step once; this sweep hits whatever
instant a seeded clock picks, including the ones fanotify cannot hold (between a rename and the
directory fsync, between removing the marker and the lock). The delegate here is spec-compliant
(its DEL succeeds without state), so every failure is the guard's own.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from typing import Any

import pytest

from tests.reliability.harness import Bench, attachment_files, marker_problems

ROUNDS = 30
SEED = 20260407


def _landing(bench: Bench, cid: str) -> str:
    """What a kill left on disk for the attachment: the marker state, and '+temp' if any."""
    names = attachment_files(bench.entries(), cid)
    marker = "none"
    if f"{cid}:eth0.json" in names:
        marker = json.loads((bench.net_dir() / f"{cid}:eth0.json").read_text())["state"]
    temp = "+temp" if any(n.endswith(".tmp") for n in names) else ""
    lock = "+lock" if f"{cid}:eth0.lock" in names else ""
    return f"{marker}{lock}{temp}"


def _kill_at_random(bench: Bench, command: str, conf: dict[str, Any], cid: str,
                    delay: float) -> str:
    guard = bench.start(command, conf, cid)
    time.sleep(delay)
    rc = guard.kill()
    return "finished" if rc >= 0 else _landing(bench, cid)


def _recover(bench: Bench, conf: dict[str, Any], cid: str) -> None:
    assert marker_problems(bench.state_dir) == []
    run = bench.run("DEL", conf, cid)
    assert (run.rc, run.stdout) == (0, b""), run.describe()
    assert attachment_files(bench.entries(), cid) == []
    assert not bench.fake_holds(cid)


def _typical(bench: Bench, conf: dict[str, Any], command: str) -> float:
    """Wall time of one warm `command` (the first ADD also validates and caches the config)."""
    walls = []
    for _ in range(2):
        if command == "DEL":
            assert bench.run("ADD", conf, "warm").rc == 0
        run = bench.run(command, conf, "warm")
        assert run.rc == 0, run.describe()
        walls.append(run.wall_s)
        bench.run("DEL", conf, "warm")
    return walls[-1]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["ADD", "DEL"])
def test_random_sigkill_sweep(bench: Bench, command: str, figures: Any) -> None:
    conf = bench.conf(bench.gated(delWithoutState="succeed"))
    span = _typical(bench, conf, command)
    rng = random.Random(SEED)
    landings: Counter[str] = Counter()
    for i in range(ROUNDS):
        cid = f"rnd{i}"
        if command == "DEL":
            assert bench.run("ADD", conf, cid).rc == 0
        landings[_kill_at_random(bench, command, conf, cid, rng.uniform(0, span))] += 1
        _recover(bench, conf, cid)
    assert bench.entries() == []
    figures.add(f"random {command} kills", rounds=ROUNDS, span_s=round(span, 3),
                landings=dict(sorted(landings.items())))
