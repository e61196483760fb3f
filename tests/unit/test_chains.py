"""The chains implement tests/support/chains.Chain (mypy does not read tests/, so this
does): every member the protocol declares, with the protocol's parameters, and the matrix's
delegate names."""

from __future__ import annotations

import inspect

import pytest

from tests.support import chains, matrix, matrix_readme
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
    assert cls().delegate in matrix.DELEGATES


def test_thin_forms_have_their_own_names() -> None:
    assert MultusThin(form=Thin.INLINE).delegate == "multus-thin"
    assert MultusThin(form=Thin.CLUSTER_NETWORK_PATH).delegate == "multus-thin-path"


def test_matrix_chains_are_in_the_matrix_vocabulary() -> None:
    pytest.importorskip("grpc")  # tests/e2e_cri's CRI client
    from tests.e2e_cri import matrix_chains

    assert set(matrix_chains.CHAINS) == set(matrix_chains.RUNS) == set(matrix.DELEGATES)
    assert set(matrix_readme.DELEGATE_NAMES) == set(matrix.DELEGATES)
    for chain, scenario in matrix_chains.cases():
        assert scenario in matrix.SCENARIOS, (chain, scenario)
    assert [s for c, s in matrix_chains.cases() if c == "fake-stateful"] == [
        s for s in matrix.SCENARIOS if s != "installer"]


def test_every_case_of_the_matrix_has_its_expected_outcome() -> None:
    pytest.importorskip("grpc")
    from tests.e2e_cri import expected, matrix_chains, runtimes

    for row in runtimes.RUNTIMES:
        for chain, scenario in matrix_chains.cases():
            for guarded in (False, True):
                assert expected.expected(row.key, chain, scenario, guarded) in matrix.OUTCOMES
    # a row for a case the matrix does not run would be a claim nothing measures
    ran = set(matrix_chains.cases())
    assert {(c, s) for _, c, s in expected.BY_CHAIN} <= ran
