"""The DEL decision table, exhaustively: every combination of evidence."""

from __future__ import annotations

import itertools

import pytest

from cni_delguard.guard import decide
from cni_delguard.guard.decide import Evidence, decide_del
from cni_delguard.state.marker import ATTEMPTED, COMPLETED, CORRUPT, DELETING

MARKERS = (None, ATTEMPTED, COMPLETED, DELETING, CORRUPT)
FLAGS = (False, True)


def expected(marker: str | None, result_cache: bool, multus: bool, prev: bool, bad: bool) -> str:
    """The table of docs/how-it-decides.md, written out independently of decide.py: completion
    (strict) needs prevResult, a libcni cache of a result or our completed marker; every
    sign of an attempt alone (our attempted or unreadable marker, an invalid libcni cache,
    multus's cache) is lenient."""
    if marker == DELETING:
        return decide.FORWARD_LENIENT
    if prev or result_cache or marker == COMPLETED:
        return decide.FORWARD_STRICT
    if marker in (ATTEMPTED, CORRUPT) or bad or multus:
        return decide.FORWARD_LENIENT
    return decide.SKIP


CASES = [
    pytest.param(
        m, r, b, mu, p, lk, id=f"marker={m}-cache={r}-bad={b}-multus={mu}-prev={p}-lock={lk}"
    )
    for m, r, b, mu, p, lk in itertools.product(MARKERS, FLAGS, FLAGS, FLAGS, FLAGS, FLAGS)
]


@pytest.mark.parametrize(("marker", "result_cache", "bad", "multus", "prev", "lock"), CASES)
def test_every_combination(marker, result_cache, bad, multus, prev, lock):
    ev = Evidence(marker, result_cache, multus, prev, lock, bad_result_cache=bad)
    decision, reason = decide_del(ev)
    assert decision == expected(marker, result_cache, multus, prev, bad)
    assert reason


def test_each_row_gives_its_own_reason():
    reasons = {
        decide_del(ev)[1]
        for ev in (
            Evidence(DELETING),
            Evidence(COMPLETED),
            Evidence(ATTEMPTED),
            Evidence(bad_result_cache=True),
            Evidence(multus_cache=True),
            Evidence(),
        )
    }
    assert len(reasons) == 6


def test_a_lock_file_alone_is_not_evidence_of_add_but_needs_the_lock():
    ev = Evidence(lock=True)
    assert decide_del(ev)[0] == decide.SKIP
    assert ev.needs_lock()
    assert not Evidence().needs_lock()


def test_names_list_what_was_found():
    ev = Evidence(ATTEMPTED, True, True, True, True, bad_result_cache=True)
    assert ev.names() == [
        "marker:attempted",
        "libcni-cache",
        "libcni-cache-invalid",
        "multus-cache",
        "prevResult",
        "lock",
    ]
    assert Evidence().names() == []


def test_an_attempt_with_a_multus_cache_stays_lenient():
    # multus writes its cache before it calls its delegates: an interrupted ADD leaves one.
    assert decide_del(Evidence(ATTEMPTED, multus_cache=True))[0] == decide.FORWARD_LENIENT
