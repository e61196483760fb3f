"""End to end on a real containerd (bookworm's 1.6.20): stale sandboxes without and with the guard.

Each scenario runs twice on a fresh node: once with the delegate straight in the conflist (the
reported deadlock must reproduce, with the runtime's own error messages), once with the same
delegate behind cni-delguard (the stale sandbox must be removable and its pod must start again).

Scenarios 1-3 use the conflist [delegate, bridge]: the delegate, where multus would be, is
tests/fakes/stale_delegate.py, which fails DEL for an attachment it never added (kube-ovn behind
multus without its cache); Debian's bridge + host-local follow it, outside the guard, so that a
pod that does start has an eth0 for containerd. Scenario 4 puts bridge + host-local themselves
behind the guard.

Every wait is on an event (containerd's socket, a conflist generation in CRI Status, a line in
the fake's record or containerd's log); every node is torn down by the fixtures, also on failure.
"""
from __future__ import annotations

import grpc
import pytest

from tests.e2e_cri.cri import CriClient, PodSpec
from tests.e2e_cri.node import Node
from tests.e2e_cri.scenario import (
    NETWORK,
    FakeDelegate,
    Network,
    bridge_conf,
    broken_ipam_dir,
    details,
    guard_log,
    ipam_dir,
    markers,
    rpc_error,
)
from tests.support import records
from tests.support.waiting import wait_for, wait_gone

pytestmark = pytest.mark.containerd

GUARD = pytest.mark.parametrize("guarded", [False, True], ids=["without-guard", "with-guard"])

DESTROY_FAILED = "failed to destroy network for sandbox"
NAME_RESERVED = "failed to reserve sandbox name"
STALE_DEL = "server_socket is required in cni.conf"
ORPHAN_ADD_SECONDS = 600  # an abandoned ADD that would otherwise run for ten minutes
# The kubelet's runtime request deadline, shortened; long enough for the ADD to start under load.
CLIENT_DEADLINE = 8
CLEANUP_BOUND = 20  # seconds containerd may take to finish an abandoned RunPodSandbox


def assert_ready(client: CriClient, sandbox: str) -> None:
    status = client.pod_status(sandbox)
    assert client.state_name(status.state) == "SANDBOX_READY", status


def assert_name_reserved(client: CriClient, pod: PodSpec, holder: str) -> None:
    err = rpc_error(client.run_pod, pod)
    assert NAME_RESERVED in details(err), details(err)
    assert f'is reserved for "{holder}"' in details(err), details(err)


def guard_del_lines(node: Node, container: str) -> list[dict[str, object]]:
    return records.guard_log(guard_log(node), command="DEL", containerID=container)


# --- 1. ADD hangs, containerd is SIGKILLed and restarted ---------------------------------------


@GUARD
def test_interrupted_add_after_containerd_restart(
    node: Node, client: CriClient, guarded: bool, e2e_ready: str
) -> None:
    fake, net, pod = FakeDelegate(node), Network(node, guarded), PodSpec("restart", uid="uid-1")
    net.apply(client, [fake.conf(hang=["ADD"]), bridge_conf(node)])
    pending = client.run_pod_future(pod)
    stale = fake.wait_call("ADD")["containerID"]

    node.kill_containerd()  # with the plugins it was running, as a crash of the node would
    err = rpc_error(pending.result)
    assert err.code() == grpc.StatusCode.UNAVAILABLE

    net.write([fake.conf(), bridge_conf(node)])  # the delegate works again after the "reboot"
    node.start_containerd()
    client.reconnect()
    net.wait_loaded(client)
    print(f"\n[e2e] {e2e_ready}: sandbox {stale[:12]} after restart")

    pods = client.list_pods()
    assert [(p.id, client.state_name(p.state)) for p in pods] == [(stale, "SANDBOX_NOTREADY")]
    if guarded:
        _stale_sandbox_is_removed(node, client, fake, pod, stale)
    else:
        _stale_sandbox_deadlocks(client, pod, stale)


def _stale_sandbox_deadlocks(client: CriClient, pod: PodSpec, stale: str) -> None:
    for call in (client.stop_pod, client.remove_pod):
        err = rpc_error(call, stale)
        assert DESTROY_FAILED in details(err) and STALE_DEL in details(err), details(err)
    assert [p.id for p in client.list_pods()] == [stale]
    assert_name_reserved(client, pod, stale)


def _stale_sandbox_is_removed(
    node: Node, client: CriClient, fake: FakeDelegate, pod: PodSpec, stale: str
) -> None:
    client.stop_pod(stale)
    client.remove_pod(stale)
    assert client.list_pods() == []
    # The guard held an "attempted" marker: it forwarded the DEL and swallowed its failure.
    assert fake.calls("DEL", stale), "the guard skipped a DEL it should have forwarded"
    assert markers(node, stale) == [], "the guard left its marker behind after the last DEL"
    fresh = client.run_pod(pod)
    assert fresh != stale
    assert_ready(client, fresh)


# --- 2. ADD fails at once ----------------------------------------------------------------------


@GUARD
def test_failed_add_releases_the_name(node: Node, client: CriClient, guarded: bool) -> None:
    fake, net, pod = FakeDelegate(node), Network(node, guarded), PodSpec("failadd", uid="uid-2")
    net.apply(client, [fake.conf(failAdd=11), bridge_conf(node)])
    err = rpc_error(client.run_pod, pod)
    assert "fake delegate: ADD refused" in details(err), details(err)
    failed = fake.calls("ADD")[0]["containerID"]

    net.apply(client, [fake.conf(), bridge_conf(node)])
    if not guarded:
        # containerd's own cleanup DEL hit the delegate, failed, and the sandbox kept its name.
        assert fake.calls("DEL", failed)
        assert [p.id for p in client.list_pods()] == [failed]
        assert_name_reserved(client, pod, failed)
        return
    assert client.list_pods() == []
    assert markers(node, failed) == []
    retry = client.run_pod(pod)  # at once, as the kubelet would
    assert_ready(client, retry)


# --- 3. The client gives up while ADD hangs ----------------------------------------------------


@GUARD
def test_client_deadline_during_hanging_add(node: Node, client: CriClient, guarded: bool) -> None:
    fake, net, pod = FakeDelegate(node), Network(node, guarded), PodSpec("deadline", uid="uid-3")
    net.apply(client, [fake.conf(hang=["ADD"]), bridge_conf(node)])
    err = rpc_error(client.run_pod, pod, timeout=CLIENT_DEADLINE)
    assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert fake.calls("ADD"), "the deadline passed before the ADD started"
    abandoned = fake.calls("ADD")[0]["containerID"]
    # containerd cancels the ADD and cleans up after the client has left: wait for its verdict.
    wait_for(lambda: _run_failed(node, pod), "containerd to finish the abandoned RunPodSandbox")

    net.apply(client, [fake.conf(), bridge_conf(node)])
    if not guarded:
        assert [p.id for p in client.list_pods()] == [abandoned]
        assert_name_reserved(client, pod, abandoned)
        return
    assert client.list_pods() == []
    retry = client.run_pod(pod)
    assert_ready(client, retry)


def _run_failed(node: Node, pod: PodSpec) -> bool:
    """containerd logs this once RunPodSandbox has returned, after its deferred cleanup."""
    meta = (f"&PodSandboxMetadata{{Name:{pod.name},Uid:{pod.uid},"
            f"Namespace:{pod.namespace},Attempt:{pod.attempt},}}")
    text = node.log_path.read_text(encoding="utf-8", errors="replace")
    return f"RunPodSandbox for {meta} failed, error" in text


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
    fake, net, pod = FakeDelegate(node), Network(node, guarded), PodSpec("orphan", uid="uid-6")
    net.apply(client, [fake.conf(hang=["ADD"], hangSeconds=ORPHAN_ADD_SECONDS), bridge_conf(node)])
    err = rpc_error(client.run_pod, pod, timeout=CLIENT_DEADLINE)
    assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert fake.calls("ADD"), "the deadline passed before the ADD started"
    add = fake.calls("ADD")[0]
    wait_gone([add["pid"]], "the abandoned delegate ADD to be killed", timeout=CLEANUP_BOUND)
    wait_for(lambda: _run_failed(node, pod), "containerd to finish the abandoned RunPodSandbox",
             timeout=CLEANUP_BOUND)
    assert not list(fake.state_dir.glob(f"{add['containerID']}*")), "the abandoned ADD left state"


# --- 4. A normal pod through the guard ---------------------------------------------------------


@GUARD
def test_normal_pod_and_real_del_error(node: Node, client: CriClient, guarded: bool) -> None:
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
    assert DESTROY_FAILED in details(err) and "not a directory" in details(err), details(err)
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


# --- 1b. A DEL repeated after a completed one --------------------------------------------------


@GUARD
def test_repeated_del_after_completed_del(node: Node, client: CriClient, guarded: bool) -> None:
    """containerd 1.6 tears the network down again in RemovePodSandbox, after StopPodSandbox did.

    The spec says a repeated DEL must succeed; the fake delegate (like kube-ovn) fails it. The
    guard answers it without the delegate: libcni's cache and its own marker are gone by then.
    """
    fake, net, pod = FakeDelegate(node), Network(node, guarded), PodSpec("twice", uid="uid-5")
    net.apply(client, [fake.conf(), bridge_conf(node)])
    sandbox = client.run_pod(pod)
    assert_ready(client, sandbox)
    client.stop_pod(sandbox)
    assert len(fake.calls("DEL", sandbox)) == 1
    if guarded:
        client.remove_pod(sandbox)
        assert client.list_pods() == []
        assert len(fake.calls("DEL", sandbox)) == 1, "the guard forwarded a DEL with no evidence"
    else:
        err = rpc_error(client.remove_pod, sandbox)
        assert DESTROY_FAILED in details(err) and STALE_DEL in details(err), details(err)
        assert len(fake.calls("DEL", sandbox)) == 2
