"""The reported stack (issue 35) on real runtimes, driven over CRI: tests/e2e_cri/reported.py's
scenarios x runtime x multus version, each without and with the guard, on nodes of their own.

The runs mostly wait (the kubelet's back-off and GC periods, daemons down for a while), so the
selected ones start at once, DELGUARD_REPORTED_NODES at a time (default 4), the longest first,
and each test waits for its own run's evidence, records its row (conftest's matrix) and compares
the outcome with expected.REPORTED: what was measured here before.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.e2e_cri import pause_image, windows
from tests.e2e_cri.conftest import CACHE
from tests.e2e_cri.expected import reported
from tests.e2e_cri.reported import SCENARIOS, Evidence, Run, run
from tests.support import cri
from tests.support.guard import frozen_or_skip, under_test
from tests.support.runtimes import BY_KEY

pytestmark = [pytest.mark.containerd, pytest.mark.slow]

# How long each scenario takes, about (minutes): the longest start first.
MINUTES = {"double-del": 1, "reboot": 1, "kube-ovn-down-at-boot": 1.5, "multus-restart": 1.5,
           "reboot-20-pods": 3, "kube-ovn-lifetimes": 5, "go-cni-stall": 5,
           "stale-conf-power-cut": 3.5}
# The rows a scenario runs on where not every one means something: what kube-ovn-lifetimes
# measures is kube-ovn's, not the runtime's; the windows are containerd 2.1.6's (windows.py).
ROWS_OF = {"kube-ovn-lifetimes": (("containerd-2.1", "v4.2.3"),), **windows.ROWS}
CONTAINERDS = ("containerd-1.6", "containerd-1.7", "containerd-2.1")


def _runs() -> list[Run]:
    """multus v4.2.3 (the reported version) on every runtime; v4.3.0 on containerd 2.1.6 (the
    reported runtime): its shim and daemon differ from v4.2.3's only in how an ADD's error is
    passed back and in STATUS (neither decides an outcome here), so one runtime shows whether it
    changes anything."""
    table = []
    rows = [*((k, "v4.2.3") for k in (*CONTAINERDS, "cri-o-1.36")), ("containerd-2.1", "v4.3.0")]
    for scenario in SCENARIOS:
        for key, version in ROWS_OF.get(scenario, rows):
            for guard in (False, True):
                table.append(Run(scenario, BY_KEY[key], version, guard, MINUTES[scenario]))
    return table


RUNS = _runs()


def workers() -> int:
    return max(1, int(os.environ.get("DELGUARD_REPORTED_NODES", "4")))


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, e2e_ready: None) -> Iterator[dict[str, Future[Evidence]]]:
    """Every selected run, started at once (DELGUARD_REPORTED_NODES at a time, longest first)."""
    if under_test() == "frozen":
        frozen_or_skip()  # the installer is the frozen bundle
    wanted = {item.callspec.params["spec"].id for item in request.session.items
              if hasattr(item, "callspec") and isinstance(item.callspec.params.get("spec"), Run)}
    chosen = sorted((r for r in RUNS if r.id in wanted and r.runtime.missing() is None),
                    key=lambda r: -r.minutes)
    stubs = cri.load_stubs(CACHE)
    work = Path(tempfile.mkdtemp(prefix="dge2e-image-"))
    archive = pause_image.build(work)
    pool = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="dge2e-reported")
    try:
        yield {r.id: pool.submit(run, r, stubs, archive) for r in chosen}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(work)


@pytest.mark.parametrize("spec", RUNS, ids=lambda r: r.id)
def test_reported(runs: dict[str, Future[Evidence]], spec: Run) -> None:
    why = spec.runtime.missing()
    if why is not None:
        pytest.skip(f"{spec.runtime.key}: {why}")
    ev = runs[spec.id].result()
    print(f"\n[reported] {spec.id}: {ev.outcome} in {ev.seconds} s; DELs at multus's daemon "
          f"{ev.multus_dels}, at kube-ovn's {ev.kube_ovn_dels}; {ev.facts}; "
          f"the runtime said: {ev.errors[:4]}")
    want = reported(spec.scenario, spec.runtime.key, spec.multus, spec.guard)
    assert ev.outcome == want, f"{spec.id}: {ev.outcome}, measured before: {want}"
