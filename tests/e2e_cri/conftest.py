"""Fixtures for the containerd end-to-end tests: a fresh node per test, torn down even on failure.

These tests are skipped (loudly, with the reason) only where containerd cannot run: not root, or
the host cannot give a private mount namespace. In CI (CI=true) missing packages are a failure,
not a skip, because tools/install-e2e-deps.sh should have installed them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e_cri import cri, pause_image
from tests.e2e_cri.node import Node, containerd_version, missing_tools
from tests.support.fakes import install_fake
from tests.support.guard import under_test

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("DELGUARD_E2E_CACHE", str(REPO / ".cache" / "e2e")))


def _why_containerd_cannot_run() -> str | None:
    if os.geteuid() != 0:
        return "containerd end-to-end tests need root"
    missing = missing_tools()
    if missing:
        return f"missing {', '.join(missing)}: run tools/install-e2e-deps.sh as root"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"no private mount namespace here: {probe.stderr.strip()}"
    return None


def pytest_report_header() -> list[str]:
    if shutil.which("containerd") is None:
        return ["containerd: not installed"]
    return [f"containerd: {containerd_version()}", f"guard under test: {under_test()}"]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The runtime the scenarios ran against, in every run's output (not only with -s)."""
    if shutil.which("containerd") is not None:
        terminalreporter.write_line(
            f"containerd e2e ran against: {containerd_version()} (guard: {under_test()})"
        )


@pytest.fixture(scope="session")
def e2e_ready() -> str:
    """The containerd version, once it is known that containerd can run here."""
    reason = _why_containerd_cannot_run()
    if reason is not None:
        if os.environ.get("CI") == "true" and os.geteuid() == 0:
            pytest.fail(f"containerd e2e cannot run in CI: {reason}")
        pytest.skip(f"SKIPPED containerd e2e: {reason}")
    version = containerd_version()
    print(f"\n[e2e] {version}")
    return version


@pytest.fixture(scope="session")
def stubs(e2e_ready: str) -> cri.Stubs:
    return cri.load_stubs(CACHE)


@pytest.fixture(scope="session")
def pause_archive(e2e_ready: str) -> Iterator[Path]:
    work = Path(tempfile.mkdtemp(prefix="dge2e-image-"))
    try:
        yield pause_image.build(work)
    finally:
        shutil.rmtree(work)


@pytest.fixture
def node(e2e_ready: str, pause_archive: Path) -> Iterator[Node]:
    """A running containerd with the pause image, loopback, bridge, host-local and the fake.

    The guard is installed by the scenarios that use it (scenario.Network with guarded=True).
    """
    node = Node.create()
    try:
        node.install_debian_plugins()
        install_fake(node.cni_bin)
        node.start_holder()
        node.start_containerd()
        if not node.overlayfs_ok():
            node.notes.append("overlayfs unusable here: native snapshotter")
            node.stop_containerd()
            node.snapshotter = "native"
            node.start_containerd()
        node.import_image(pause_archive)
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
        wait_for(lambda: client.image_known(pause_image.IMAGE_REF), "CRI to see the pause image")
        yield client
    finally:
        remove_all_pods(client)
        client.close()


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
