"""Fixtures of the kubelet suite: what every node shares, and the runs, started together.

The kubelet's GC runs once a minute (pkg/kubelet/kubelet.go ContainerGCPeriod), so a verdict
takes minutes. The runs are independent nodes (each its own containerd and kubelet), so the
selected ones are started at once, DELGUARD_KUBELET_NODES at a time (default 7), the longest
first, and each test waits for its own run's evidence. Every node is torn down by its run,
also when it fails; an interrupted session cancels the runs not started.

Skipped (with the reason) where a kubelet node cannot run: not root, no private namespaces, the
kubelet or a runtime not built. Under CI those are failures: tools/test.sh builds everything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.e2e_cri import cri, pause_image
from tests.e2e_kubelet import kubelet, reported, slow_add
from tests.e2e_kubelet.installer_pod import ImageArchive
from tests.e2e_kubelet.scenarios import RUNS, Run, run, workers
from tests.e2e_kubelet.site import Shared, skip_or_fail
from tests.support.guard import frozen_or_skip, under_test

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("DELGUARD_E2E_CACHE", str(REPO / ".cache" / "e2e")))
TOOLS = ("runc", "unshare", "nsenter", "gcc", "ip")


def why_not_here() -> str | None:
    if os.geteuid() != 0:
        return "the kubelet suite needs root"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"missing {', '.join(missing)}: run tools/install-deps.sh test as root"
    probe = subprocess.run(["unshare", "--mount", "--net", "--propagation", "private", "true"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"no private mount and network namespaces here: {probe.stderr.strip()}"
    return kubelet.missing()


@pytest.fixture(scope="session")
def kubelet_shared() -> Iterator[Shared]:
    why = why_not_here()
    if why is not None:
        skip_or_fail(why)
    if under_test() == "frozen":
        frozen_or_skip()
    work = Path(tempfile.mkdtemp(prefix="dgkl-pause-"))
    image = ImageArchive()
    try:
        yield Shared(cri.load_stubs(CACHE), pause_image.build(work), image)
    finally:
        image.close()
        shutil.rmtree(work)


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, kubelet_shared: Shared
) -> Iterator[dict[str, Future[Any]]]:
    """Every selected run, started at once (DELGUARD_KUBELET_NODES at a time, longest first)."""
    every: list[Any] = [*RUNS, *reported.RUNS, *slow_add.RUNS]
    wanted = {_key(item) for item in request.session.items} & {_spec_key(r) for r in every}
    chosen = sorted((r for r in every if _spec_key(r) in wanted), key=lambda r: -r.minutes)
    pool = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="dgkl-node")
    try:
        yield {_spec_key(r): pool.submit(_runner(r), r, kubelet_shared) for r in chosen}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _runner(spec: Any) -> Any:
    """The module that runs a spec of its own Run type."""
    for module in (reported, slow_add):
        if isinstance(spec, module.Run):
            return module.run
    return run


def _spec_key(spec: Any) -> str:
    return f"{spec.scenario}[{spec.id}]"


def _key(item: pytest.Item) -> str:
    """The run a test waits for: its `spec` parameter (see test_kubelet.py)."""
    callspec = getattr(item, "callspec", None)
    spec = callspec.params.get("spec") if callspec is not None else None
    return _spec_key(spec) if isinstance(spec, Run | reported.Run | slow_add.Run) else ""


def evidence(runs: dict[str, Future[Any]], spec: Any) -> Any:
    """The run's evidence once it is done (a run's bound is its own waits')."""
    return runs[_spec_key(spec)].result()
