"""The bench of the multus chain suite: one node with real multus (in one of the FORMS of
tests/support/multusnode.py) per test, torn down also when the test fails.

Needs root (network and mount namespaces), multus v4.3.0 built (tools/install-peers.sh), cnitool
(tools/build-cnitool.sh, built on first use) and the frozen guard (tools/build.sh); skipped with
the reason otherwise, a failure under CI.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.guard import frozen_or_skip, under_test
from tests.support.multus import VERSION
from tests.support.multusnode import MultusNode
from tests.support.netns import available
from tests.support.peers import built_or_skip


@pytest.fixture
def mnode(request: pytest.FixtureRequest) -> Iterator[MultusNode]:
    reason = available()
    if reason:
        pytest.skip(reason)
    built_or_skip("multus", VERSION)
    if under_test() == "frozen":
        frozen_or_skip()
    bench = MultusNode.create(request.param)
    try:
        yield bench
    finally:
        errors = bench.close()
        assert not errors, f"left behind: {errors}"
