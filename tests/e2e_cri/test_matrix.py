"""The matrix: each chain's scenarios on every runtime, without and with the frozen guard.

Each case (a runtime row, a chain and one of its scenarios: matrix_chains.runtime_cases; the rows
either side of containerd's CNIResult check run only the cases it decides) runs on a fresh node
(conftest.py), drives the scenario (matrix_scenarios.py) over CRI, records its row
(tests/support/matrix.py: the runtime, its version as the binary reports it, the chain, the
scenario, the guard, the outcome, the seconds, and with the guard the DELs it answered without
the delegate) and then compares the outcome with expected.py's table: what was measured here
before, so that a runtime, chain or guard that changes behaviour fails the suite. The row is
recorded first, so that the matrix shows what happened even when the test fails.
"""

from __future__ import annotations

import pytest

from tests.e2e_cri.expected import expected
from tests.e2e_cri.matrix_chains import runtime_cases
from tests.e2e_cri.matrix_scenarios import SCENARIOS, Stage, timed
from tests.e2e_cri.node import Node
from tests.e2e_cri.scenario import Network, guard_log
from tests.support import matrix, records
from tests.support.chains import Chain, Pod
from tests.support.cri import CriClient, PodSpec

pytestmark = pytest.mark.containerd


def kept_dels(node: Node) -> int:
    """The DELs the guard answered without calling the delegate in this scenario (its decision
    log's `skip`s; the node, and so its log, is the scenario's own)."""
    return len(records.guard_log(guard_log(node), command="DEL", decision="skip"))


@pytest.mark.parametrize("guarded", [False, True], ids=["without-guard", "with-guard"])
@pytest.mark.parametrize(("runtime", "chain", "scenario"), runtime_cases(),
                         indirect=["runtime", "chain"],
                         ids=[f"{r.key}-{c}-{s}" for r, c, s in runtime_cases()])
def test_scenario(
    node: Node, client: CriClient, chain: Chain, runtime_version: str, scenario: str,
    guarded: bool,
) -> None:
    spec = PodSpec(scenario, uid=f"uid-{scenario}")
    # The pod is in the API for the whole scenario, as for a pod the kubelet still deletes (a
    # chain with multus reads it; the fake reads nothing).
    chain.pod_exists(Pod(spec.namespace, spec.name, spec.uid), True)
    stage = Stage(node, client, chain, Network(node, guarded, cni_version=chain.cni_version), spec)
    outcome, seconds = timed(SCENARIOS[scenario], stage)
    row = matrix.Row(node.runtime.runtime, runtime_version, chain.delegate, scenario, guarded,
                     outcome, seconds, kept=kept_dels(node) if guarded else None)
    matrix.record(row)
    print(f"\n[matrix] {node.runtime.key} {chain.delegate} {scenario} guard={guarded}: "
          f"{outcome} in {seconds} s; the runtime said: {stage.evidence}")
    want = expected(node.runtime.key, chain.delegate, scenario, guarded)
    assert outcome == want, f"{node.runtime.key} {scenario}: {outcome}, measured before: {want}"
