"""End to end on every runtime row: what the guard itself must do, beside the matrix.

test_matrix.py runs the matrix's scenarios (the fake-stateful chain and others); these two check
the guard's own behaviour with real parts, each without and with the guard on a fresh node:

- an ADD the runtime abandons (client deadline) must not outlive the plugin the runtime killed;
- Debian's bridge + host-local behind the guard: a pod gets its IP, and a real DEL error after a
  completed ADD comes back to the runtime (strict forward), then the DEL goes through (on the
  runtimes that retry a DEL that failed: expected.py's completed-del-fails).

Every wait is on an event (the runtime's socket, a conflist generation in CRI Status, a line in
the fake's record or the runtime's log); every node is torn down by the fixtures, also on failure.
"""
from __future__ import annotations

import pytest

from tests.e2e_cri.node import Node
from tests.e2e_cri.scenario import (
    NETWORK,
    FakeDelegate,
    Network,
    abandoned_run,
    bridge_conf,
    broken_ipam_dir,
    details,
    guard_del_lines,
    ipam_dir,
    markers,
    rpc_error,
    skip_unless_failed_dels_block,
)
from tests.support.cri import CriClient, PodSpec
from tests.support.waiting import wait_gone

pytestmark = pytest.mark.containerd

GUARD = pytest.mark.parametrize("guarded", [False, True], ids=["without-guard", "with-guard"])

ORPHAN_ADD_SECONDS = 600  # an abandoned ADD that would otherwise run for ten minutes
CLEANUP_BOUND = 20  # seconds containerd may take to finish an abandoned RunPodSandbox


@GUARD
def test_abandoned_add_does_not_outlive_the_runtime(
    node: Node, client: CriClient, guarded: bool
) -> None:
    """When containerd gives up on an ADD, the delegate's ADD must end with the plugin it killed.

    containerd 1.6 kills the plugin it exec'd when the client's deadline cancels the request,
    then waits for the plugin's stdout and stderr to close. Without the guard that plugin is the
    delegate. With the guard it is the guard: a delegate that outlived it would keep the
    inherited stderr open, so containerd's RunPodSandbox (and the sandbox's name) would stay
    stuck until the delegate ended, and the delegate's ADD would run on beside the runtime's DEL.
    """
    if not node.runtime.cancels_add:
        pytest.skip(f"{node.runtime.key} lets the ADD run on after the client's deadline (its own "
                    "ADD timeout: the matrix's client-deadline seconds): nothing is killed")
    fake, net, pod = FakeDelegate(node), Network(node, guarded), PodSpec("orphan", uid="uid-6")
    net.apply(client, [fake.conf(hang=["ADD"], hangSeconds=ORPHAN_ADD_SECONDS), bridge_conf(node)])
    # The runtime finishes the abandoned RunPodSandbox within CLEANUP_BOUND: it did not wait for
    # the delegate's ten minutes.
    abandoned_run(client, node, pod, lambda: fake.calls("ADD"), finish_bound=CLEANUP_BOUND)
    add = fake.calls("ADD")[0]
    wait_gone([add["pid"]], "the abandoned delegate ADD to be killed", timeout=CLEANUP_BOUND)
    assert not list(fake.state_dir.glob(f"{add['containerID']}*")), "the abandoned ADD left state"


# --- 4. A normal pod through the guard ---------------------------------------------------------


@GUARD
def test_normal_pod_and_real_del_error(node: Node, client: CriClient, guarded: bool) -> None:
    skip_unless_failed_dels_block(node)
    net, pod = Network(node, guarded), PodSpec("normal", uid="uid-4")
    net.apply(client, [bridge_conf(node)])
    sandbox = client.run_pod(pod)
    ip = client.pod_status(sandbox).network.ip
    assert ip.startswith("10.251.73."), ip
    lease = ipam_dir(node) / NETWORK / ip
    assert lease.is_file()
    assert bool(markers(node, sandbox)) == guarded  # the guard recorded the completed ADD

    # host-local cannot open its store any more: a real DEL error after a completed ADD.
    net.apply(client, [bridge_conf(node, broken_ipam_dir(node))])
    err = rpc_error(client.stop_pod, sandbox)
    text = details(err)
    assert node.runtime.messages.destroy_failed in text and "not a directory" in text, text
    assert lease.is_file(), "the lease went although DEL failed"
    if guarded:
        decisions = [line.get("decision") for line in guard_del_lines(node, sandbox)]
        assert decisions and all("forward" in str(d) for d in decisions), decisions

    net.apply(client, [bridge_conf(node)])
    client.stop_pod(sandbox)
    assert not lease.exists(), "DEL did not reach bridge/host-local"
    client.remove_pod(sandbox)
    assert client.list_pods() == []
    assert markers(node, sandbox) == []
