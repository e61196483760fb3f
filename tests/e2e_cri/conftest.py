"""Fixtures for the CRI end-to-end tests: a fresh node per test and runtime row, torn down even on
failure.

Every test that takes `node` runs once per row of runtimes.FULL (its id names the row:
containerd-1.6, containerd-2.1, ...), the matrix also on the boundary rows (runtimes.BOUNDARY). A
row whose binaries are missing is skipped with the reason, and so is everything where no runtime
can run (not root, no mount namespace); in CI (CI=true), where tools/test.sh installs and builds
everything first, either is a failure instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e_cri import matrix_chains, pause_image
from tests.e2e_cri.node import Node
from tests.support import cri
from tests.support.chains import Chain
from tests.support.fakes import install_fake
from tests.support.guard import under_test
from tests.support.runtimes import FULL, RUNTIMES, Runtime
from tests.support.skips import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("DELGUARD_E2E_CACHE", str(REPO / ".cache" / "e2e")))
# What can sit behind the guard, by the matrix's delegate name (tests/support/chains.py's
# protocol), and the scenarios each runs: matrix_chains.py.
CHAINS = matrix_chains.CHAINS
SUITE = "CRI e2e"
_versions: dict[str, str] = {}  # runtime key -> version as its binary reported it, this run


def _why_no_runtime_can_run() -> str | None:
    if os.geteuid() != 0:
        return "CRI end-to-end tests need root"
    if shutil.which("unshare") is None:
        return "missing unshare: run tools/install-deps.sh test as root"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"no private mount namespace here: {probe.stderr.strip()}"
    return None


def pytest_report_header() -> list[str]:
    lines = [f"guard under test: {under_test()}"]
    for row in RUNTIMES:
        why = row.missing()
        lines.append(f"{row.key}: {why or row.version()}")
    return lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The runtimes the scenarios ran against, in every run's output (not only with -s)."""
    for key, version in sorted(_versions.items()):
        terminalreporter.write_line(f"CRI e2e ran against: {key} {version} (guard: {under_test()})")


@pytest.fixture(scope="session")
def e2e_ready() -> None:
    """Fails or skips once per session when no runtime can run here at all."""
    reason = _why_no_runtime_can_run()
    if reason is not None:
        skip_or_fail(reason, SUITE)


@pytest.fixture(params=FULL, ids=[r.key for r in FULL])
def runtime(request: pytest.FixtureRequest, e2e_ready: None) -> Runtime:
    """One row of runtimes.FULL (test_matrix.py parametrizes it with the boundary rows too),
    known to be installed."""
    row: Runtime = request.param
    why = row.missing()
    if why is not None:
        skip_or_fail(f"{row.key}: {why}", SUITE)
    if row.key not in _versions:
        _versions[row.key] = row.version()
        print(f"\n[e2e] {row.key}: {_versions[row.key]}")
    return row


@pytest.fixture
def runtime_version(runtime: Runtime) -> str:
    """The version as the runtime's binary reports it (what the matrix records)."""
    return _versions[runtime.key]


@pytest.fixture(scope="session")
def stubs(e2e_ready: None) -> cri.Stubs:
    return cri.load_stubs(CACHE)


@pytest.fixture(scope="session")
def pause_archive(e2e_ready: None) -> Iterator[Path]:
    work = Path(tempfile.mkdtemp(prefix="dge2e-image-"))
    try:
        yield pause_image.build(work)
    finally:
        shutil.rmtree(work)


@pytest.fixture
def node(runtime: Runtime, pause_archive: Path) -> Iterator[Node]:
    """A running runtime with the pause image, loopback, bridge, host-local and the fake.

    The guard is installed by the scenarios that use it (scenario.Network with guarded=True).
    """
    node = Node.create(runtime)
    try:
        node.install_debian_plugins()
        install_fake(node.cni_bin)
        node.come_up(pause_archive)
        yield node
    finally:
        log = node.log_tail(60)
        problems = node.teardown()
        assert not problems, f"node teardown left things behind: {problems}\n{log}"


@pytest.fixture
def client(node: Node, stubs: cri.Stubs) -> Iterator[cri.CriClient]:
    """A CRI client on the node's socket, handed out once CRI knows the pause image."""
    from tests.support.waiting import wait_for

    client = cri.CriClient(node.socket, stubs, node.cgroup_parent)
    try:
        if node.runtime.needs_image:
            wait_for(lambda: client.image_known(pause_image.IMAGE_REF),
                     "CRI to see the pause image")
        else:
            wait_for(lambda: _answers(client), "CRI to answer Version")
        yield client
    finally:
        remove_all_pods(client)
        client.close()


def _answers(client: cri.CriClient) -> bool:
    import grpc

    try:
        return bool(client.version().runtime_name)
    except grpc.RpcError:
        return False


def remove_all_pods(client: cri.CriClient) -> None:
    """Best effort, before the node goes: the runtime's own removal where it still works."""
    import grpc

    try:
        pods = client.list_pods()
    except grpc.RpcError:
        return
    for pod in pods:
        for call in (client.stop_pod, client.remove_pod):
            try:
                call(pod.id, timeout=20)
            except grpc.RpcError:
                break


@pytest.fixture
def chain(request: pytest.FixtureRequest, node: Node) -> Iterator[Chain]:
    """A chain started for this node: its plugins in the node's bin dir, its work dir inside.

    Its name comes by indirect parametrization (test_matrix.py: matrix_chains.cases())."""
    made = CHAINS[request.param](node)
    try:
        made.start(node.cni_bin, node.tmp / "chain", node.cni_cache)
        yield made
    finally:
        made.stop()
