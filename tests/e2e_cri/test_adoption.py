"""End to end on a real runtime: a sandbox stuck before the guard came, freed by installing it.

The operator's story (issue 11): an ADD failed while the guard was not on the node, so containerd
kept a NOTREADY sandbox whose DEL fails for ever and whose name stays reserved. The operator then
runs `cni-delguard install` on that containerd's conf dir; the very next StopPodSandbox and
RemovePodSandbox must succeed and the pod must start again under its name.

The delegate, where multus would be, is tests/fakes/stale_delegate.py installed as `multus`:
with `cniDir` it behaves like multus v4's scratch cache (it saves `<cniDir>/<containerID>` before
anything else, keeps it when its ADD fails, and fails every DEL for which it holds no state, as
kube-ovn behind multus does). No installable plugin shows that behaviour. Named `multus` with a
`cniDir`, it makes the installer derive the guard's `multusCacheDirs` the way it does for the
real multus. It runs on the runtimes where a failed ADD leaves the sandbox stuck without the
guard (expected.py's add-fails); elsewhere there is nothing to free, and it says so in its skip.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e_cri.expected import expected
from tests.e2e_cri.matrix_scenarios import STALE_DEL
from tests.e2e_cri.node import Node
from tests.e2e_cri.scenario import (
    FakeDelegate,
    Network,
    bridge_conf,
    details,
    guard_log,
    guard_state,
    rpc_error,
)
from tests.support import guard
from tests.support.cri import CriClient, PodSpec
from tests.support.fakes import install_fake
from tests.support.paths import widen
from tests.support.waiting import wait_for

pytestmark = pytest.mark.containerd



def multus_like(node: Node, fake: FakeDelegate, **knobs: object) -> dict[str, object]:
    return dict(fake.conf(**knobs), type="multus", cniDir=str(node.tmp / "multus-cache"))


def install(node: Node) -> subprocess.CompletedProcess[str]:
    """`cni-delguard install` as an operator runs it; the frozen binary copies its own bundle."""
    args = ["install", "--bin-dir", str(node.cni_bin), "--conf-dir", str(node.cni_conf),
            "--wrap", "multus", "--state-dir", str(guard_state(node)),
            "--log-file", str(guard_log(node)), "--log-level", "debug"]
    widen(node.cni_bin)  # the node's state and log are under the temp dir (tests/support/paths.py)
    if guard.under_test() == "frozen":
        argv = [str(guard.frozen_binary()), *args]
    else:
        guard.install_guard(node.cni_bin)
        argv = [sys.executable, "-m", "cni_delguard", *args, "--no-bundle"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_sandbox_stuck_before_the_guard_is_freed_after_install(
    node: Node, client: CriClient, runtime_version: str
) -> None:
    if expected(node.runtime.key, "fake-stateful", "add-fails", guarded=False) != "stuck":
        pytest.skip(f"{node.runtime.key} removes a sandbox whose ADD failed without the guard "
                    "(the matrix's add-fails): nothing is stuck before the install")
    install_fake(node.cni_bin, "multus")
    fake, net, pod = FakeDelegate(node), Network(node, False), PodSpec("adopt", uid="uid-11")
    net.apply(client, [multus_like(node, fake, failAdd=11), bridge_conf(node)])
    err = rpc_error(client.run_pod, pod)
    assert "fake delegate: ADD refused" in details(err), details(err)
    stuck = fake.calls("ADD")[0]["containerID"]
    assert (node.tmp / "multus-cache" / stuck).is_file(), "the multus-like cache was not left"

    # The delegate works again (kube-ovn is back), but the sandbox is stuck: DEL has no state.
    net.apply(client, [multus_like(node, fake), bridge_conf(node)])
    err = rpc_error(client.stop_pod, stuck)
    text = details(err)
    assert node.runtime.messages.destroy_failed in text and STALE_DEL in text, text
    assert [p.id for p in client.list_pods()] == [stuck]
    assert node.runtime.messages.name_reserved in details(rpc_error(client.run_pod, pod))
    dels_before = len(fake.calls("DEL", stuck))
    print(f"\n[e2e] {runtime_version}: sandbox {stuck[:12]} stuck; installing the guard")

    done = install(node)
    assert done.returncode == 0, done.stderr
    wait_for(lambda: "cni-delguard" in client.cni_config(), "containerd to load the wrapped conf")
    wrapped = json.loads((node.cni_conf / "10-e2e.conflist").read_text())
    assert wrapped["plugins"][0]["multusCacheDirs"] == [str(node.tmp / "multus-cache")]

    client.stop_pod(stuck)  # the first call after install succeeds
    client.remove_pod(stuck)
    assert client.list_pods() == []
    assert len(fake.calls("DEL", stuck)) > dels_before, "the guard did not forward the DEL"
    lines = [json.loads(x) for x in guard_log(node).read_text().splitlines()]
    dels = [x for x in lines if x.get("command") == "DEL" and x.get("containerID") == stuck]
    assert dels and all(x["decision"] == "forward-lenient" for x in dels), dels
    assert "multus-cache" in dels[0]["evidence"]
    assert dels[0]["delegateError"]["msg"] == STALE_DEL

    fresh = client.run_pod(pod)
    assert fresh != stuck
    status = client.pod_status(fresh)
    assert client.state_name(status.state) == "SANDBOX_READY", status
