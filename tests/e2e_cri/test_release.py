"""End to end on every runtime row: a sandbox whose completed ADD can never be deleted, freed by
`cni-delguard release --pod`.

Debian's bridge + host-local behind the guard; once the pod runs, host-local's store becomes
unusable (its dataDir's parent is a file), so every DEL fails for real, as it does when a network
daemon is gone for good. The guard rightly forwards that DEL strictly: the sandbox cannot be
stopped or removed and its name stays reserved. After `release`, StopPodSandbox and
RemovePodSandbox succeed, the name is reusable, and what the delegate could not delete (the IP
lease) is left where README's "Already stuck?" says to look for it.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from cni_delguard.ops import stuck
from tests.e2e_cri.node import Node
from tests.e2e_cri.scenario import (
    NETWORK,
    Network,
    assert_name_reserved,
    assert_ready,
    bridge_conf,
    broken_ipam_dir,
    details,
    guard_del_lines,
    guard_log,
    guard_state,
    ipam_dir,
    markers,
    rpc_error,
    skip_unless_failed_dels_block,
)
from tests.support.cri import CriClient, PodSpec
from tests.support.guard import guard_argv

pytestmark = pytest.mark.containerd

UID = "3f2b9c1e-7a45-4d08-b6e1-5c9d2a8f0e31"
REASON = "host-local store lost with the disk; lease cleaned up by hand"


def release(node: Node, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*guard_argv(), "release", "--state-dir", str(guard_state(node)), *argv],
        capture_output=True, text=True, timeout=60, check=False,
    )


def test_release_frees_a_sandbox_whose_del_always_fails(node: Node, client: CriClient) -> None:
    skip_unless_failed_dels_block(node)
    net, pod = Network(node, guarded=True), PodSpec("release", uid=UID)
    net.apply(client, [bridge_conf(node)])
    sandbox = client.run_pod(pod)
    assert_ready(client, sandbox)
    ip = client.pod_status(sandbox).network.ip
    lease = ipam_dir(node) / NETWORK / ip
    assert lease.is_file()

    # Stuck: every DEL fails for real, and the guard returns that error (a completed ADD).
    net.apply(client, [bridge_conf(node, broken_ipam_dir(node))])
    for call in (client.stop_pod, client.remove_pod):
        err = rpc_error(call, sandbox)
        text = details(err)
        assert node.runtime.messages.destroy_failed in text and "not a directory" in text, text
    assert_name_reserved(node, client, PodSpec("release", uid=UID, attempt=0), sandbox)
    failed = guard_del_lines(node, sandbox)
    assert failed and {x["decision"] for x in failed} == {"forward-strict"}, failed
    assert {(x["pod"], x["podUID"]) for x in failed} == {(f"{pod.namespace}/release", UID)}

    # What doctor will show: the attachment, and the command that frees it.
    records = [json.loads(x) for x in guard_log(node).read_text().splitlines() if x.strip()]
    [found] = stuck.find_stuck(records, time.time() + 3600, state_dir=str(guard_state(node)))
    assert (found.container_id, found.pod) == (sandbox, f"{pod.namespace}/release")
    assert "not a directory" in str(found.last_error["msg"])

    assert release(node, "--pod", f"{pod.namespace}/nobody").returncode == 2
    done = release(node, "--pod", f"{pod.namespace}/release", "--reason", REASON)
    assert done.returncode == 0, done.stderr
    assert sandbox in done.stdout

    client.stop_pod(sandbox)
    client.remove_pod(sandbox)
    assert client.list_pods() == []
    assert markers(node, sandbox) == [], "marker, lock or release record left behind"
    released = [x for x in guard_del_lines(node, sandbox) if x["decision"] == "released"]
    assert len(released) == 1, guard_del_lines(node, sandbox)
    assert released[0]["release"]["reason"] == REASON
    assert "not a directory" in released[0]["delegateError"]["msg"]
    assert lease.is_file(), "the leak README documents: host-local's lease stays"

    net.apply(client, [bridge_conf(node)])
    fresh = client.run_pod(pod)
    assert fresh != sandbox
    assert_ready(client, fresh)
    assert client.pod_status(fresh).network.ip != ip  # the leaked lease still holds the old one
