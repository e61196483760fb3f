"""Fixtures of the cluster suite: what every cluster shares, and the runs, started together.

The scenarios mostly wait (rollouts, the kubelet's GC once a minute, a reboot), and each is a
cluster of its own (its node's namespaces, its own etcd and API server), so the selected runs
start at once, DELGUARD_CLUSTER_NODES at a time (default 5), the longest first; each test waits
for its own run's evidence. Every cluster is torn down by its run, also when it fails.

Skipped (with the reason) where a cluster cannot run: not root, no private namespaces, a peer not
built. Under CI those are failures: tools/test.sh builds everything.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.e2e_cluster import controlplane, workloads
from tests.e2e_cluster.kube import HELM_VERSION
from tests.e2e_cluster.releases import Releases
from tests.e2e_cluster.scenarios import RUNS, Evidence, Run, run
from tests.e2e_cluster.site import Shared, skip_or_fail
from tests.e2e_cri import cri, pause_image
from tests.e2e_kubelet import conftest as kubelet_conftest
from tests.support import peers

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("DELGUARD_E2E_CACHE", str(REPO / ".cache" / "e2e")))


def why_not_here() -> str | None:
    why = kubelet_conftest.why_not_here() or controlplane.missing()
    if why is None and not peers.find("helm", HELM_VERSION).built():
        why = f"helm {HELM_VERSION} is not built: run tools/install-peers.sh helm"
    return why


def workers() -> int:
    """Clusters at once: each is an etcd, an API server, a controller manager, a scheduler, a
    containerd and a kubelet (about 0.8 GiB), mostly waiting."""
    return max(1, int(os.environ.get("DELGUARD_CLUSTER_NODES", "5")))


@pytest.fixture(scope="session")
def cluster_shared() -> Iterator[Shared]:
    why = why_not_here()
    if why is not None:
        skip_or_fail(why)
    work = Path(tempfile.mkdtemp(prefix="dgcl-images-"))
    releases = Releases(HELM_VERSION)
    try:
        yield Shared(cri.load_stubs(CACHE), pause_image.build(work),
                     workloads.build_csi_image(work), releases.get)
    finally:
        releases.close()
        shutil.rmtree(work)


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest,
         cluster_shared: Shared) -> Iterator[dict[str, Future[Evidence]]]:
    wanted = set().union(*(_keys(item) for item in request.session.items))
    chosen = sorted((r for r in RUNS if _spec_key(r) in wanted), key=lambda r: -r.minutes)
    pool = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="dgcl-node")
    try:
        yield {_spec_key(r): pool.submit(run, r, cluster_shared) for r in chosen}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _spec_key(spec: Run) -> str:
    return f"{spec.scenario}[{spec.id}]"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cluster_run(scenario): the test reads that scenario's "
                            "run (tests/e2e_cluster/scenarios.py RUNS), which must be started")


def _keys(item: pytest.Item) -> set[str]:
    """The runs a test waits for: its `spec` parameter's, and its cluster_run markers'."""
    callspec = getattr(item, "callspec", None)
    spec = callspec.params.get("spec") if callspec is not None else None
    keys = {_spec_key(spec)} if isinstance(spec, Run) else set()
    for marker in item.iter_markers("cluster_run"):
        keys |= {_spec_key(r) for r in RUNS if r.scenario == marker.args[0]}
    return keys


def evidence(runs: dict[str, Future[Evidence]], spec: Run) -> Evidence:
    return runs[_spec_key(spec)].result()
