"""The DEL decision table, exhaustively: every combination of evidence."""

from __future__ import annotations

import itertools

import pytest

from cni_delguard.guard import decide
from cni_delguard.guard.decide import Evidence, decide_del
from cni_delguard.state.marker import ATTEMPTED, COMPLETED, CORRUPT, DELETING

MARKERS = (None, ATTEMPTED, COMPLETED, DELETING, CORRUPT)
FLAGS = (False, True)


def expected(marker: str | None, result_cache: bool, multus: bool, prev: bool) -> str:
    """The table of docs/DESIGN.md, written out independently of decide.py."""
    if marker == DELETING:
        return decide.FORWARD_LENIENT
    if prev or result_cache or marker == COMPLETED:
        return decide.FORWARD_STRICT
    if marker in (ATTEMPTED, CORRUPT):
        return decide.FORWARD_LENIENT
    if multus:
        return decide.FORWARD_STRICT
    return decide.SKIP


CASES = [
    pytest.param(m, r, mu, p, lk, id=f"marker={m}-cache={r}-multus={mu}-prev={p}-lock={lk}")
    for m, r, mu, p, lk in itertools.product(MARKERS, FLAGS, FLAGS, FLAGS, FLAGS)
]


@pytest.mark.parametrize(("marker", "result_cache", "multus", "prev", "lock"), CASES)
def test_every_combination(marker, result_cache, multus, prev, lock):
    ev = Evidence(marker, result_cache, multus, prev, lock)
    decision, reason = decide_del(ev)
    assert decision == expected(marker, result_cache, multus, prev)
    assert reason


def test_a_lock_file_alone_is_not_evidence_of_add_but_needs_the_lock():
    ev = Evidence(lock=True)
    assert decide_del(ev)[0] == decide.SKIP
    assert ev.needs_lock()
    assert not Evidence().needs_lock()


def test_names_list_what_was_found():
    ev = Evidence(ATTEMPTED, True, True, True, True)
    assert ev.names() == ["marker:attempted", "libcni-cache", "multus-cache", "prevResult", "lock"]
    assert Evidence().names() == []


def test_an_attempt_with_a_multus_cache_stays_lenient():
    # multus writes its cache before it calls its delegates: an interrupted ADD leaves one.
    assert decide_del(Evidence(ATTEMPTED, multus_cache=True))[0] == decide.FORWARD_LENIENT
