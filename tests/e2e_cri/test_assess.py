"""`cni-delguard assess` (the frozen binary) on the suite's nodes: each runtime row, running, and
each chain of the matrix behind the guard, as the matrix's scenarios set them up.

assess is given the runtime as the kubelet reports it (`--runtime NAME://VERSION`, from the
running runtime's CRI Version answer, which this test asks as the kubelet does), reads the
node's conflist from the node's dirs, and must print what the shipped verdicts say for that
runtime's range and that chain: the same verdict computed here from the matrix of record they
were built from (delguard_build/matrix.json, the file README renders), the kind of chain the
conflist is. The e2e cluster suite runs the same command in the installer's pod.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from cni_delguard.ops.assess import chains
from delguard_build import matrix, ranges, verdict
from tests.e2e_cri.cri import CriClient
from tests.e2e_cri.matrix_chains import CHAINS
from tests.e2e_cri.node import Node
from tests.e2e_cri.scenario import Network
from tests.support.chains import Behaviour, Chain
from tests.support.installerproc import command

pytestmark = pytest.mark.containerd

# The kind of chain assess must find behind the guard for each chain the suites run.
KIND = {"fake-stateful": "plain", "multus-thin": "multus-thin-inline",
        "multus-thin-path": "multus-thin-path", "multus-thick": "multus-thick-path"}


def assess(node: Node, client: CriClient, *more: str) -> subprocess.CompletedProcess[str]:
    said = client.version()  # what the kubelet reports as the node's containerRuntimeVersion
    return subprocess.run(
        [*command(), "assess", "--conf-dir", str(node.cni_conf), "--bin-dir", str(node.cni_bin),
         "--runtime", f"{said.runtime_name}://{said.runtime_version}", *more],
        capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("chain", list(CHAINS), indirect=True)
def test_assess_on_a_running_node(node: Node, client: CriClient, chain: Chain,
                                  runtime_version: str) -> None:
    Network(node, guarded=True, cni_version=chain.cni_version).apply(
        client, chain.plugins(Behaviour()))
    done = assess(node, client, "--output", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["runtime"]["name"] == node.runtime.runtime
    assert doc["runtime"]["version"] == runtime_version
    assert doc["runtime"]["from"] == (f"--runtime {node.runtime.runtime}://{runtime_version}")
    where = ranges.of(node.runtime.runtime, runtime_version)
    assert where is not None and doc["range"]["name"] == where.name
    kind = KIND[chain.delegate]
    assert doc["chain"]["kind"] == kind
    assert doc["conf"]["wrapped"] is True
    record = matrix.record()
    want = []
    for name in chains.BY_NAME[kind].chains:
        v = verdict.verdict(record.rows, where, name)
        if v.measured:
            want.append((name, v.stuck_without, v.named(verdict.FREED), list(v.versions)))
    got = [(m["chain"], m["stuckWithout"], m["freed"], m["versions"]) for m in doc["measured"]]
    assert got == want
    assert doc["status"] == ("measured" if want else "unmeasured")
    text = assess(node, client)
    assert text.returncode == 0, text.stderr
    assert text.stdout.rstrip().splitlines()[-1] == f"summary:  {doc['summary']}"
    print(f"\n[assess] {node.runtime.key} {chain.delegate}:\n{text.stdout}")
