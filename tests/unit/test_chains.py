"""The multus chains implement tests/support/chains.Chain (mypy does not read tests/, so this
does): every member the protocol declares, with the protocol's parameters, and the matrix's
delegate names."""

from __future__ import annotations

import inspect

import pytest

from tests.support import chains, matrix
from tests.support.multus import MultusThick, MultusThin

MEMBERS = [n for n, v in vars(chains.Chain).items() if inspect.isfunction(v) and n[0] != "_"]


@pytest.mark.parametrize("cls", [MultusThin, MultusThick], ids=lambda c: c.__name__)
def test_chain_protocol(cls: type) -> None:
    assert set(MEMBERS) == {"start", "plugins", "pod_exists", "calls", "forget", "stop"}
    for name in MEMBERS:
        want = list(inspect.signature(getattr(chains.Chain, name)).parameters)
        have = list(inspect.signature(getattr(cls, name)).parameters)
        assert have == want, f"{cls.__name__}.{name}{have} is not Chain.{name}{want}"
    assert cls().delegate in matrix.DELEGATES
