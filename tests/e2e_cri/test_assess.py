"""`cni-delguard assess` (the frozen binary) on the suite's nodes: each runtime row, running, and
each chain of the matrix behind the guard, as the matrix's scenarios set them up.

assess asks the running runtime its version over CRI (the node's socket, `--runtime-endpoint`,
as a DaemonSet would find it under /host/run), reads the node's conflist and multus from the
node's dirs, and must print what the packaged matrix (cni_delguard/ops/assess/matrix.json, the
file README renders) says for that runtime's range and that chain: the same verdict computed
here from the same file, the version the runtime reports (what the matrix records), the kind of
chain the conflist is. Another helper's e2e runs call the same command on their nodes.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from cni_delguard.ops.assess import chains, matrix, ranges, verdict
from tests.e2e_cri.matrix_chains import CHAINS
from tests.e2e_cri.node import Node
from tests.e2e_cri.scenario import Network
from tests.support.chains import Behaviour, Chain
from tests.support.cri import CriClient
from tests.support.installerproc import command

pytestmark = pytest.mark.containerd

# The kind of chain assess must find behind the guard for each chain the suites run.
KIND = {"fake-stateful": "plain", "multus-thin": "multus-thin-inline",
        "multus-thin-path": "multus-thin-path", "multus-thick": "multus-thick-path"}


def assess(node: Node, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command(), "assess", "--conf-dir", str(node.cni_conf), "--bin-dir", str(node.cni_bin),
         "--runtime-endpoint", f"unix://{node.socket}", *more],
        capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("chain", list(CHAINS), indirect=True)
def test_assess_on_a_running_node(node: Node, client: CriClient, chain: Chain,
                                  runtime_version: str) -> None:
    Network(node, guarded=True, cni_version=chain.cni_version).apply(
        client, chain.plugins(Behaviour()))
    done = assess(node, "--output", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["runtime"]["name"] == node.runtime.runtime
    assert doc["runtime"]["version"] == runtime_version
    assert doc["runtime"]["from"].startswith(f"CRI Version on {node.socket} (runtime.v1")
    where = ranges.of(node.runtime.runtime, runtime_version)
    assert where is not None and doc["range"]["name"] == where.name
    kind = KIND[chain.delegate]
    assert doc["chain"]["kind"] == kind
    assert doc["conf"]["wrapped"] is True
    packaged = matrix.packaged()
    want = []
    for delegate in chains.BY_NAME[kind].delegates:
        v = verdict.verdict(packaged.rows, where, delegate)
        if v.measured:
            want.append((delegate, v.stuck_without, v.named(verdict.FREED), list(v.versions)))
    got = [(m["chain"], m["stuckWithout"], m["freed"], m["versions"]) for m in doc["measured"]]
    assert got == want
    assert doc["status"] == ("measured" if want else "unmeasured")
    text = assess(node)
    assert text.returncode == 0, text.stderr
    assert text.stdout.rstrip().splitlines()[-1] == f"summary:  {doc['summary']}"
    print(f"\n[assess] {node.runtime.key} {chain.delegate}:\n{text.stdout}")
