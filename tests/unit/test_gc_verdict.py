"""tests/e2e_kubelet/kubelet.py gc_verdict: the kubelet and cluster suites' verdict on a stale
sandbox, from the kubelet's log. "stuck" needs STORM_PERIODS failed GC passes on one sandbox that
is still there, however long it took; "removed" needs the sandbox gone."""

from __future__ import annotations

import pytest

from tests.e2e_kubelet.kubelet import GC_STOP_FAILED, STORM_PERIODS, gc_verdict

SID = "a" * 64
OTHER = "b" * 64


def log(*sandboxes: str) -> str:
    """One kubelet log line per failed GC pass on each sandbox given, among unrelated lines."""
    lines = ['I1129 kubelet.go:2400] "SyncLoop ADD"']
    lines += [f'E1129 kuberuntime_gc.go:182] "{GC_STOP_FAILED}" err="rpc error" sandboxID="{s}"'
              for s in sandboxes]
    return "\n".join(lines)


@pytest.mark.parametrize(("text", "gone", "present", "verdict"), [
    pytest.param(log(SID), True, set(), "removed", id="gone-is-removed"),
    pytest.param(log(*[SID] * STORM_PERIODS), True, set(), "removed", id="gone-after-failures"),
    pytest.param(log(*[SID] * STORM_PERIODS), False, {SID}, "stuck", id="a-storm-is-stuck"),
    pytest.param(log(*[SID] * (STORM_PERIODS - 1)), False, {SID}, None, id="two-passes-wait"),
    pytest.param(log(*[OTHER] * STORM_PERIODS, SID), False, {SID, OTHER}, None,
                 id="another-sandboxs-storm-does-not-count"),
    pytest.param(log(*[SID] * STORM_PERIODS), False, {OTHER}, None, id="a-subject-gone-waits"),
])
def test_the_verdict_counts_failed_gc_passes(text: str, gone: bool, present: set[str],
                                             verdict: str | None) -> None:
    assert gc_verdict(text, gone, present, {SID}) == verdict
