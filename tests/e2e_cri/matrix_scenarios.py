"""The matrix's scenarios, driven over CRI as the kubelet drives a runtime: one function each.

A scenario makes a sandbox stale (or not) in its own way, then does what the kubelet does with it
(StopPodSandbox, RemovePodSandbox, each retried, then RunPodSandbox again under the same name) and
says what came of it: one of tests/support/matrix.py's outcomes, with the runtime's own error
lines as evidence. It asserts what must hold whatever the outcome (the delegate's error is the
one the runtime reports; a stuck sandbox's name is reserved for it; a removed one's pod starts
again). Which outcome each runtime gives is not decided here: tests/e2e_cri/test_matrix.py
records it and compares it with its table of what was measured before.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from tests.e2e_cri.node import Node
from tests.e2e_cri.scenario import Network, abandoned_run, details, guard_state, rpc_error
from tests.support.chains import Behaviour, Chain
from tests.support.cri import CriClient, PodSpec
from tests.support.guard import guard_argv
from tests.support.runtimes import Messages
from tests.support.waiting import wait_for

# kube-ovn's DEL without `server_socket`: the fake's without state, the kube-ovn fake's when multus
# handed it a config without it
STALE_DEL = "server_socket is required in cni.conf"
# The end delegate told to fail (failDel, failAdd): "fake delegate: ..." (tests/fakes/
# stale_delegate.py) or "fake kube-ovn: ..." (tests/fakes/kube_ovn.py, through multus)
DEL_REFUSED = "DEL refused"
ADD_REFUSED = "ADD refused"
RETRIES = 2  # the kubelet retries Stop/Remove for ever; twice shows a failure is not transient
HEALTHY = Behaviour()
HANG_ADD = Behaviour(hang=("ADD",))
RELEASE_REASON = "delegate lost its state for good; cleaned up by hand"


@dataclass
class Stage:
    """One scenario's world: the node, its runtime's CRI client, the chain and the conflist."""

    node: Node
    client: CriClient
    chain: Chain
    net: Network
    pod: PodSpec
    evidence: list[str] = field(default_factory=list)  # the runtime's error lines, in order

    @property
    def messages(self) -> Messages:
        return self.node.runtime.messages

    @property
    def guarded(self) -> bool:
        return self.net.guarded

    def apply(self, behaviour: Behaviour = HEALTHY) -> None:
        """The conflist for this behaviour, loaded by the running runtime."""
        self.net.apply(self.client, self.chain.plugins(behaviour))

    def write(self, behaviour: Behaviour = HEALTHY) -> None:
        """The conflist for this behaviour, on disk only (the runtime is down)."""
        self.net.write(self.chain.plugins(behaviour))

    def first_add(self) -> str:
        """The container ID of the sandbox whose ADD the delegate saw first."""
        calls = wait_for(lambda: self.chain.calls("ADD"), "the delegate's ADD to start")
        return str(calls[0]["containerID"])

    def listed(self, sandbox: str) -> bool:
        return sandbox in [p.id for p in self.client.list_pods()]

    def fails(self, call: Callable[..., object], *args: object, **kwargs: object) -> str:
        text = details(rpc_error(call, *args, **kwargs))
        self.evidence.append(text)
        return text


def run_ready(stage: Stage) -> str:
    sandbox = stage.client.run_pod(stage.pod)
    status = stage.client.pod_status(sandbox)
    assert stage.client.state_name(status.state) == "SANDBOX_READY", status
    return sandbox


def kubelet_cleanup(stage: Stage, sandbox: str, back: Callable[[], object] = lambda: None) -> str:
    """What the kubelet does with a sandbox it no longer wants; "removed" or "stuck".

    StopPodSandbox, then RemovePodSandbox, each retried RETRIES times while it fails (a sandbox
    the runtime no longer lists is done with); removed means gone from the list and its pod
    starts again under the same name, stuck that a call kept failing with the runtime's
    destroy-network error and the name stays reserved for the stale sandbox. `back` runs between
    the two: what comes back on the node before the pod is run again (reboot: a daemon)."""
    removed = _stop_and_remove(stage, sandbox)
    back()
    if not removed:
        reserved = stage.fails(stage.client.run_pod, stage.pod)
        assert stage.messages.name_reserved in reserved, reserved
        assert stage.messages.reserved_for.format(holder=sandbox) in reserved, reserved
        return "stuck"
    assert not stage.listed(sandbox), stage.client.list_pods()
    fresh = run_ready(stage)
    assert fresh != sandbox
    return "removed"


def _stop_and_remove(stage: Stage, sandbox: str) -> bool:
    """Stop, then Remove, each retried while it fails; False when one kept failing."""
    for call in (stage.client.stop_pod, stage.client.remove_pod):
        for _ in range(RETRIES):
            if not stage.listed(sandbox):
                break
            try:
                call(sandbox)
                break
            except grpc.RpcError as exc:
                stage.evidence.append(details(exc))
        else:
            assert stage.messages.destroy_failed in stage.evidence[-1], stage.evidence
            return False
    return True


# --- the scenarios -------------------------------------------------------------------------------


def double_del(stage: Stage) -> str:
    """A pod deleted normally; the delegate forgets its state after the good DEL (as kube-ovn
    does once multus has dropped its cache), so any second DEL fails."""
    stage.apply()
    sandbox = run_ready(stage)
    outcome = kubelet_cleanup(stage, sandbox)
    dels = stage.chain.calls("DEL", sandbox)
    assert dels, "no DEL reached the delegate at all"
    if outcome == "stuck":
        _stuck_on(stage, STALE_DEL)  # the second DEL's own error
    if stage.guarded and outcome == "removed":
        # (a delegate whose every DEL fails, as kube-ovn's behind multus-thin-path, keeps the
        # evidence of the ADD: the guard forwards each retry, rightly)
        assert len(dels) == 1, f"the guard forwarded a DEL with no evidence: {dels}"
    return outcome


def kill_mid_add(stage: Stage) -> str:
    """The runtime SIGKILLed (with the plugins it runs) while the delegate's ADD hangs; the
    delegate works again when the runtime is back."""
    return _down_mid_add(stage, stage.node.kill_runtime, stage.node.start_runtime)


def reboot(stage: Stage) -> str:
    """The node loses power while the delegate's ADD hangs: processes, netns, /run gone.

    What the chain ran in the node (multus thick's daemon) dies with it and, as a DaemonSet's pod
    that the kubelet starts again after the runtime, comes back only after the kubelet's first
    Stop and Remove of the stale sandbox: their DELs reach a node without it."""

    def down() -> None:
        stage.node.power_off()
        stage.chain.node_down()

    def back() -> None:
        # (until now the stale sandbox is the only one: every DEL so far is its own)
        reached = len(stage.chain.calls("DEL"))
        stage.evidence.append(f"(its DELs that reached the end delegate before the node's "
                              f"daemons were back: {reached})")
        stage.chain.node_up(stage.node.enter)

    return _down_mid_add(stage, down, stage.node.boot, back)


def _down_mid_add(stage: Stage, down: Callable[[], object], up: Callable[[], object],
                  back: Callable[[], object] = lambda: None) -> str:
    stage.apply(HANG_ADD)
    pending = stage.client.run_pod_future(stage.pod)
    stale = stage.first_add()
    down()
    assert rpc_error(pending.result).code() == grpc.StatusCode.UNAVAILABLE
    stage.write()
    up()
    stage.client.reconnect()
    stage.net.wait_loaded(stage.client)
    return _stale_outcome(stage, stale, back)


def _stale_outcome(stage: Stage, stale: str, back: Callable[[], object] = lambda: None) -> str:
    outcome = kubelet_cleanup(stage, stale, back)
    if outcome == "stuck":
        _stuck_on(stage, STALE_DEL)
    elif stage.guarded and stage.chain.calls("DEL", stale):
        # A DEL the guard let through (its "attempted" marker) and answered: its marker is gone.
        assert not _guard_files(stage.node, stale), "the guard left its marker behind"
    return outcome


def add_fails(stage: Stage) -> str:
    """The delegate's ADD fails at once; it works again before the kubelet cleans up."""
    stage.apply(Behaviour(fail_add=11))
    assert ADD_REFUSED in stage.fails(stage.client.run_pod, stage.pod)
    failed = stage.first_add()
    stage.apply()
    return _stale_outcome(stage, failed)


def client_deadline(stage: Stage) -> str:
    """The client (the kubelet) gives up on RunPodSandbox while the delegate's ADD hangs."""
    stage.apply(HANG_ADD)
    stage.pod = abandoned_run(stage.client, stage.node, stage.pod,
                              lambda: stage.chain.calls("ADD"),
                              finish_bound=stage.node.runtime.abandoned_run_bound)
    abandoned = stage.first_add()
    stage.apply()
    return _stale_outcome(stage, abandoned)


def completed_del_fails(stage: Stage) -> str:
    """A pod whose ADD completed; then its delegate loses the state (a node that rebooted with
    the pod on it), so every DEL fails."""
    return _completed_then_lost(stage)[0]


def _completed_then_lost(stage: Stage) -> tuple[str, str]:
    stage.apply()
    sandbox = run_ready(stage)
    stage.chain.forget(sandbox)
    outcome = kubelet_cleanup(stage, sandbox)
    if outcome == "stuck":
        _stuck_on(stage, STALE_DEL)
    return outcome, sandbox


def _stuck_on(stage: Stage, delegate_error: str) -> None:
    """The runtime's destroy errors carry the delegate's own message."""
    destroys = [e for e in stage.evidence if stage.messages.destroy_failed in e]
    assert destroys and all(delegate_error in e for e in destroys), stage.evidence


def release(stage: Stage) -> str:
    """completed-del-fails, then the operator's `cni-delguard release --pod` (with the guard)."""
    outcome, sandbox = _completed_then_lost(stage)
    if outcome != "stuck" or not stage.guarded:
        return outcome
    pod = f"{stage.pod.namespace}/{stage.pod.name}"
    done = subprocess.run(
        [*guard_argv(), "release", "--state-dir", str(guard_state(stage.node)), "--pod", pod,
         "--reason", RELEASE_REASON],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert sandbox in done.stdout, done.stdout
    return "released" if kubelet_cleanup(stage, sandbox) == "removed" else "stuck"


def del_error_propagates(stage: Stage) -> str:
    """A normal pod whose delegate fails its DEL (with state): the error must reach the runtime,
    and once the delegate recovers the guard lets the pod be removed.

    The delegate fails DEL from the start: CRI-O runs DEL with the config its ADD used (libcni's
    cache), so a config changed after ADD would not reach the DEL there."""
    stage.apply(Behaviour(fail_del=11))
    sandbox = run_ready(stage)
    try:
        stage.client.stop_pod(sandbox)
    except grpc.RpcError as exc:
        stage.evidence.append(details(exc))
    returned = bool(stage.evidence)
    if returned:
        _stuck_on(stage, DEL_REFUSED)
    stage.apply()
    after = kubelet_cleanup(stage, sandbox)
    stage.evidence.append(f"(after the delegate recovered: {after})")
    if stage.guarded:
        # Without the guard a runtime that runs DEL again at Remove is stuck here: double-del.
        assert after == "removed", stage.evidence
    return "error-returned" if returned else "removed"


SCENARIOS: dict[str, Callable[[Stage], str]] = {
    "double-del": double_del,
    "kill-mid-add": kill_mid_add,
    "reboot": reboot,
    "add-fails": add_fails,
    "client-deadline": client_deadline,
    "completed-del-fails": completed_del_fails,
    "release": release,
    "del-error-propagates": del_error_propagates,
}


def _guard_files(node: Node, container: str) -> list[str]:
    from tests.e2e_cri.scenario import markers

    return [p.name for p in markers(node, container)]


def timed(scenario: Callable[[Stage], str], stage: Stage) -> tuple[str, float]:
    started = time.monotonic()
    outcome = scenario(stage)
    return outcome, round(time.monotonic() - started, 1)
