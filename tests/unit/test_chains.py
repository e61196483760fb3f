"""The chains implement tests/support/chains.Chain (mypy does not read tests/, so this
does): every member the protocol declares, with the protocol's parameters, and the matrix's
chain names; where multus thick's daemon puts its socket (its readiness:
tests/support/daemon.py)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from delguard_build import chains as measured
from tests.support import chains, matrix
from tests.support.multus import MultusThick, MultusThin, Thin
from tests.support.stateful_chain import FakeStateful

MEMBERS = [n for n, v in vars(chains.Chain).items() if inspect.isfunction(v) and n[0] != "_"]


@pytest.mark.parametrize("cls", [MultusThin, MultusThick, FakeStateful],
                         ids=lambda c: c.__name__)
def test_chain_protocol(cls: type) -> None:
    assert set(MEMBERS) == {"start", "plugins", "pod_exists", "calls", "forget", "node_down",
                            "node_up", "stop"}
    for name in MEMBERS:
        want = list(inspect.signature(getattr(chains.Chain, name)).parameters)
        have = list(inspect.signature(getattr(cls, name)).parameters)
        assert have == want, f"{cls.__name__}.{name}{have} is not Chain.{name}{want}"
    assert cls().delegate in matrix.CHAINS


def test_thin_forms_have_their_own_names() -> None:
    assert MultusThin(form=Thin.INLINE).delegate == "multus-thin"
    assert MultusThin(form=Thin.CLUSTER_NETWORK_PATH).delegate == "multus-thin-path"


def test_matrix_chains_are_in_the_matrix_vocabulary() -> None:
    pytest.importorskip("grpc")  # tests/e2e_cri's CRI client
    from tests.e2e_cri import matrix_chains

    # every chain the suites run is in the vocabulary, which may hold more: the names of chains
    # whose rows other runs bring (a page renders them only when they are there)
    assert set(matrix_chains.CHAINS) == set(matrix_chains.RUNS) <= set(matrix.CHAINS)
    assert set(measured.CHAINS) == set(matrix.CHAINS)
    for chain, scenario in matrix_chains.cases():
        assert scenario in matrix.SCENARIOS, (chain, scenario)
    assert [s for c, s in matrix_chains.cases() if c == "fake-stateful"] == [
        s for s in matrix.SCENARIOS
        if s not in ("installer", *matrix.REPORTED_SCENARIOS, *matrix.SLOW_ADD_SCENARIOS)]


def test_every_case_of_the_matrix_has_its_expected_outcome() -> None:
    pytest.importorskip("grpc")
    from tests.e2e_cri import expected, matrix_chains
    from tests.support import runtimes

    for row in runtimes.RUNTIMES:
        for chain, scenario in matrix_chains.cases(row.boundary):
            for guarded in (False, True):
                assert expected.expected(row.key, chain, scenario, guarded) in matrix.OUTCOMES
    # a row for a case the matrix does not run would be a claim nothing measures
    ran = set(matrix_chains.cases())
    assert {(c, s) for _, c, s in expected.BY_CHAIN} <= ran
    for row in runtimes.BOUNDARY:
        ran = set(matrix_chains.cases(boundary=True))
        assert {("fake-stateful", s) for r, s in expected.EXPECTED if r == row.key} | {
            (c, s) for r, c, s in expected.BY_CHAIN if r == row.key} == ran


def test_thick_daemon_socket_in_the_nodes_run(tmp_path: Path) -> None:
    """Given the node's /run, the daemon's socket is where its DaemonSet puts it (gone with the
    node's /run at a reboot); without it, in the chain's work dir."""
    in_node = MultusThick(run=tmp_path / "run")
    assert in_node.socket_dir == tmp_path / "run" / "multus"
    assert in_node.node_socket_dir == "/run/multus"
    own = MultusThick(work=tmp_path / "chain")
    assert own.socket_dir == tmp_path / "chain" / "run-multus"
    assert own.node_socket_dir == str(own.socket_dir)
