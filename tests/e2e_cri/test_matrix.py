"""The matrix: every scenario on every runtime and chain, without and with the frozen guard.

Each case runs on a fresh node (conftest.py: one per row of runtimes.RUNTIMES), drives one
scenario of scenarios.py over CRI, records its row (tests/support/matrix.py: the runtime, its
version as the binary reports it, the chain, the scenario, the guard, the outcome, the seconds)
and then compares the outcome with expected.py's table: what was measured here before, so that a
runtime, chain or guard that changes behaviour fails the suite. The row is recorded first, so
that the matrix (and README, rendered from it) shows what happened even when the test fails.
"""

from __future__ import annotations

import pytest

from tests.e2e_cri.cri import CriClient, PodSpec
from tests.e2e_cri.expected import expected
from tests.e2e_cri.matrix_scenarios import SCENARIOS, Stage, timed
from tests.e2e_cri.node import Node
from tests.e2e_cri.scenario import Network
from tests.support import matrix
from tests.support.chains import Chain

pytestmark = pytest.mark.containerd

@pytest.mark.parametrize("guarded", [False, True], ids=["without-guard", "with-guard"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_scenario(
    node: Node, client: CriClient, chain: Chain, runtime_version: str, scenario: str,
    guarded: bool,
) -> None:
    stage = Stage(node, client, chain, Network(node, guarded),
                  PodSpec(scenario, uid=f"uid-{scenario}"))
    outcome, seconds = timed(SCENARIOS[scenario], stage)
    row = matrix.Row(node.runtime.runtime, runtime_version, chain.delegate, scenario, guarded,
                     outcome, seconds)
    matrix.record(row)
    print(f"\n[matrix] {node.runtime.key} {chain.delegate} {scenario} guard={guarded}: "
          f"{outcome} in {seconds} s; the runtime said: {stage.evidence}")
    want = expected(node.runtime.key, chain.delegate, scenario, guarded)
    assert outcome == want, f"{node.runtime.key} {scenario}: {outcome}, measured before: {want}"
