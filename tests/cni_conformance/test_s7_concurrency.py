"""Scenario 7: racing operations on one attachment, and 50 attachments at once.

Two ADD/DEL pairs race on the same attachment (a runtime must not do that, but one that SIGKILLs
a plugin and retries can): every call succeeds, the guard's marker always agrees with the
delegate's state, and nothing stray (temp file, lock, marker) is left. 50 attachments added and
deleted in parallel: 50 completed markers, then none, and no stray files.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.cni_conformance.checks import ok
from tests.cni_conformance.lab import VERSIONS, Lab
from tests.support.cnitool import Outcome

pytestmark = pytest.mark.netns
SCENARIO = "7 concurrency"
ROUNDS = 4
PARALLEL = 50


def stdin_of(conf: dict[str, Any]) -> dict[str, Any]:
    return dict(conf["plugins"][0], name=conf["name"], cniVersion=conf["cniVersion"])


def run(lab: Lab, command: str, conf: dict[str, Any], cid: str) -> Outcome:
    return lab.exec_guard(command, stdin_of(conf), cid, lab.outer.path, "eth0")


def pair(lab: Lab, conf: dict[str, Any], cid: str) -> list[Outcome]:
    return [run(lab, "ADD", conf, cid), run(lab, "DEL", conf, cid)]


def fake_states(lab: Lab) -> set[str]:
    return {p.name for p in lab.fake_state.iterdir()}


def assert_consistent(lab: Lab, network: str, cid: str) -> None:
    """A completed marker exactly when the delegate holds state; nothing else on disk."""
    markers = lab.markers(network)
    has_state = f"{cid}:eth0" in fake_states(lab)
    assert markers == ({f"{cid}:eth0": "completed"} if has_state else {}), (markers, has_state)
    stray = [f for f in lab.state_files() if not f.endswith((".json", ".lock"))]
    assert stray == [], f"stray files: {stray}"


@pytest.mark.parametrize("version", VERSIONS)
def test_racing_add_del_pairs_on_one_attachment(lab: Lab, version: str) -> None:
    # A generous lock wait: this test is about consistency, not about how loaded the machine is.
    conf = lab.conflist(version, [lab.guard(lab.fake(), lockTimeout=120)])
    net, cid = conf["name"], "race-1"
    with ThreadPoolExecutor(max_workers=2) as pool:
        for _ in range(ROUNDS):
            results = list(pool.map(lambda _: pair(lab, conf, cid), range(2)))
            for out in (o for res in results for o in res):
                ok(out, "racing ADD/DEL")
            assert_consistent(lab, net, cid)
        adds = list(pool.map(lambda _: run(lab, "ADD", conf, cid), range(2)))
    for out in adds:
        ok(out, "racing ADD")
    assert lab.markers(net) == {f"{cid}:eth0": "completed"}, "marker lost in racing ADDs"
    ok(run(lab, "DEL", conf, cid), "final DEL")
    assert fake_states(lab) == set()
    assert lab.state_files() == []


@pytest.mark.parametrize("version", VERSIONS)
def test_fifty_attachments_in_parallel(lab: Lab, version: str) -> None:
    conf = lab.conflist(version, [lab.guard(lab.fake())])
    net = conf["name"]
    cids = [f"par-{i:02d}" for i in range(PARALLEL)]
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        for out in pool.map(lambda c: run(lab, "ADD", conf, c), cids):
            ok(out, "parallel ADD")
        markers = lab.markers(net)
        assert markers == {f"{c}:eth0": "completed" for c in cids}, "markers lost"
        assert fake_states(lab) == {f"{c}:eth0" for c in cids}
        for out in pool.map(lambda c: run(lab, "DEL", conf, c), cids):
            ok(out, "parallel DEL")
    assert len(lab.fake_calls("DEL")) == PARALLEL
    assert fake_states(lab) == set()
    assert lab.state_files() == []
