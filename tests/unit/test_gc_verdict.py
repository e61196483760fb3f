"""tests/e2e_kubelet/kubelet.py gc_verdict: the kubelet and cluster suites' verdict on a stale
sandbox, from the kubelet's log. "stuck" needs the runtime's failures on a sandbox still there
for STORM_PERIODS GC periods and, where the GC is what fails on it, as many failed GC passes;
"removed" needs the sandbox gone."""

from __future__ import annotations

import pytest

from tests.e2e_kubelet.kubelet import (
    DESTROY_FAILED,
    GC_PERIOD,
    GC_STOP_FAILED,
    STORM_PERIODS,
    gc_verdict,
)

SID = "a" * 64
OTHER = "b" * 64
LONG = STORM_PERIODS * GC_PERIOD + 1.0  # seconds: past the periods
SHORT = STORM_PERIODS * GC_PERIOD - 1.0


def log(*, destroy: tuple[str, ...] = (), gc: tuple[str, ...] = ()) -> str:
    """A kubelet log: a runtime failure line per sandbox in `destroy`, a GC failure line per
    sandbox in `gc` (one per failed pass), among unrelated lines."""
    lines = ['I1129 kubelet.go:2400] "SyncLoop ADD"']
    lines += [f'E1129 pod_workers.go:1301] "Error syncing pod" err="{DESTROY_FAILED} \\"{s}\\""'
              for s in destroy]
    lines += [f'E1129 kuberuntime_gc.go:182] "{GC_STOP_FAILED}" err="{DESTROY_FAILED} '
              f'\\"{s}\\"" sandboxID="{s}"' for s in gc]
    return "\n".join(lines)


@pytest.mark.parametrize(("text", "gone", "present", "waited", "verdict"), [
    pytest.param(log(destroy=(SID,)), True, set(), SHORT, "removed", id="gone-is-removed"),
    pytest.param(log(destroy=(SID,)), False, {SID}, LONG, "stuck",
                 id="the-pod-workers-failures-for-three-periods"),
    pytest.param(log(destroy=(SID,)), False, {SID}, SHORT, None, id="before-three-periods"),
    pytest.param(log(), False, {SID}, LONG, None, id="no-failure-is-no-verdict"),
    pytest.param(log(destroy=(OTHER,)), False, {SID, OTHER}, LONG, None,
                 id="another-sandboxs-failures-do-not-count"),
    pytest.param(log(destroy=(SID,)), False, {OTHER}, LONG, None, id="a-subject-gone-waits"),
    pytest.param(log(gc=(SID,) * STORM_PERIODS), False, {SID}, LONG, "stuck",
                 id="three-failed-gc-passes"),
    pytest.param(log(gc=(SID,) * (STORM_PERIODS - 1)), False, {SID}, LONG, None,
                 id="three-periods-with-two-gc-passes-wait-for-the-third"),
    pytest.param(log(gc=(SID,) * STORM_PERIODS), False, {SID}, SHORT, None,
                 id="three-passes-before-three-periods-wait"),
])
def test_the_verdict(text: str, gone: bool, present: set[str], waited: float,
                     verdict: str | None) -> None:
    assert gc_verdict(text, gone, present, {SID}, waited) == verdict
