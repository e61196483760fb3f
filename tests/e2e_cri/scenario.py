"""What the scenarios share: the fake delegate's knobs and record, the conflists."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc

from tests.e2e_cri.node import Node, bridge_prefix
from tests.support import records
from tests.support.confs import guard_plugin, stale_delegate
from tests.support.cri import CriClient, PodSpec
from tests.support.guard import install_guard
from tests.support.records import fake_calls
from tests.support.waiting import wait_for

NETWORK = "e2e"
SUBNET = "10.251.73.0/24"  # only ever inside the pods' netns and on a bridge without an address
GUARD_ADD_TIMEOUT = 120  # longer than any scenario: the runtime, not the guard, gives up first


@dataclass
class FakeDelegate:
    """tests/fakes/stale_delegate.py as installed in a node: its config and what it recorded."""

    node: Node

    @property
    def record(self) -> Path:
        return self.node.tmp / "fake-record.jsonl"

    @property
    def state_dir(self) -> Path:
        return self.node.tmp / "fake-state"

    def conf(self, **knobs: Any) -> dict[str, Any]:
        return stale_delegate(self.state_dir, self.record, **knobs)

    def calls(
        self, command: str | None = None, container: str | None = None
    ) -> list[dict[str, Any]]:
        return fake_calls(self.record, command, containerID=container)

    def wait_call(self, command: str) -> dict[str, Any]:
        found = wait_for(lambda: self.calls(command), f"the fake delegate's {command} to start")
        return found[0]


def bridge_conf(node: Node, data_dir: Path | None = None) -> dict[str, Any]:
    """Debian's bridge + host-local; no gateway address and no masquerading on the host."""
    return {"type": "bridge", "bridge": bridge_prefix(node.name) + "0",
            "isGateway": False, "ipMasq": False,
            "ipam": {"type": "host-local", "dataDir": str(data_dir or ipam_dir(node)),
                     "ranges": [[{"subnet": SUBNET}]]}}


def broken_ipam_dir(node: Node) -> Path:
    """A dataDir host-local cannot create (its parent is a file): its DEL fails for real."""
    blocker = node.tmp / "ipam-blocker"
    blocker.touch()
    return blocker / "ipam"


def ipam_dir(node: Node) -> Path:
    return node.tmp / "ipam"


def guard_state(node: Node) -> Path:
    return node.tmp / "delguard-state"


def guard_log(node: Node) -> Path:
    return node.tmp / "delguard.log"


def wrap(node: Node, delegate: dict[str, Any]) -> dict[str, Any]:
    return guard_plugin(delegate, state_dir=guard_state(node), log_file=guard_log(node),
                        logLevel="debug", timeouts={"add": GUARD_ADD_TIMEOUT})


@dataclass
class Network:
    """The node's one conflist; each write gets a generation so its reload can be awaited."""

    node: Node
    guarded: bool
    generation: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    mark: int = 0  # where the runtime's log stood before the last write (runtimes.conf_mark)
    cni_version: str = "1.0.0"  # the chain's (tests/support/chains.py)

    def __post_init__(self) -> None:
        if self.guarded and not (self.node.cni_bin / "cni-delguard").exists():
            install_guard(self.node.cni_bin)

    def conflist(self, plugins: list[dict[str, Any]]) -> dict[str, Any]:
        """The first plugin is the one behind the guard (where multus would be); the rest follow.

        Only one plugin is wrapped: the guard keys its markers by (network, container, ifname),
        which every plugin of a conflist shares, so two guards in one list would share markers.
        """
        if self.guarded:
            plugins = [wrap(self.node, plugins[0]), *plugins[1:]]
        self.generation += 1
        return {"cniVersion": self.cni_version, "name": NETWORK,
                "e2eGeneration": f"gen-{self.generation}", "plugins": plugins}

    def write(self, plugins: list[dict[str, Any]]) -> str:
        conf = self.conflist(plugins)
        self.mark = self.node.runtime.conf_mark(self._log())
        self.node.write_conflist(conf)
        self.history.append(conf)
        return str(conf["e2eGeneration"])

    def apply(self, cri: CriClient, plugins: list[dict[str, Any]]) -> None:
        """Write the conflist and wait until the runtime has loaded this very version."""
        token = self.write(plugins)
        self.wait_loaded(cri, token)

    def _log(self) -> str:
        try:
            return self.node.log_text()
        except FileNotFoundError:
            return ""

    def wait_loaded(self, cri: CriClient, token: str | None = None) -> None:
        token = token or f"gen-{self.generation}"

        def config() -> str:
            try:
                return cri.cni_config()
            except grpc.RpcError:  # still starting up
                return ""

        wait_for(lambda: self.node.runtime.conf_loaded(config, self._log, self.mark, token),
                 f"{self.node.runtime.key} to load conflist {token}")


def rpc_error(call: Any, *args: Any, **kwargs: Any) -> grpc.RpcError:
    """Run a CRI call that must fail; return its error."""
    try:
        call(*args, **kwargs)
    except grpc.RpcError as exc:
        return exc
    raise AssertionError(f"{getattr(call, '__name__', call)} succeeded; it was expected to fail")


def details(exc: grpc.RpcError) -> str:
    return str(exc.details())


# A grpc-go server resets a stream whose deadline (the request's grpc-timeout) has passed with
# RST_STREAM(CANCEL), and grpc-core reports a received CANCEL as this (see past_deadline).
SERVER_DEADLINE_RESET = "Received RST_STREAM with error code 8"
DEADLINE_SLACK = 0.05  # s: time.time() (the client's deadline) against time.monotonic()


def not_by_deadline(code: grpc.StatusCode, text: str, elapsed: float,
                    deadline: float) -> str | None:
    """Why a call that failed after `elapsed` s did not end by its `deadline` (None: it did).

    The client's own timer gives DEADLINE_EXCEEDED. A grpc-go server since v1.72.0 (grpc-go PR
    8071; containerd 2.1.6's v1.72.2, CRI-O 1.36.3's v1.79.3; not the v1.59 of containerd 1.6.38
    to 1.7.35) also arms a timer from the request's grpc-timeout and resets the stream with
    RST_STREAM(CANCEL) when it fires (internal/transport/http2_server.go:603-610 at v1.72.2), as
    gRPC's PROTOCOL-HTTP2 asks of servers, warning of this very race. The two fire within a
    millisecond of each other, the server's never first (grpc-core rounds the timeout it sends
    up); grpc-core maps a CANCEL it receives to DEADLINE_EXCEEDED only when its own millisecond
    clock says the deadline has passed, else to CANCELLED "Stream removed (... error code 8)".
    Measured with a grpc-go v1.72.2 server that never answers: 14 of 150 one-second calls
    CANCELLED, at 1.0012 s, with client and server at nice -15 (as on an idle machine); none of
    300 at load 21. A grpc-go client (the kubelet) maps the same late CANCEL to DeadlineExceeded
    (http2_client.go handleRSTStream). Anything else, or either one before the deadline, is not
    the deadline's doing."""
    if elapsed < deadline - DEADLINE_SLACK:
        return f"{code.name} after {elapsed:.3f} s, before the {deadline} s deadline: {text!r}"
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return None
    if code == grpc.StatusCode.CANCELLED and SERVER_DEADLINE_RESET in text:
        return None
    return f"{code.name} after {elapsed:.3f} s is not the deadline's: {text!r}"


# How long the client waits before it gives up on a RunPodSandbox whose ADD hangs (the kubelet
# waits 4 minutes): 8 s lets the delegate's ADD start on a node at rest. Under load it may not
# (measured once in 10 runs of test_stale_sandbox.py at load 35 to 50 on 2 cores: the runtime,
# the frozen guard and the fake delegate each start a process first); that request was abandoned
# before the ADD, so proves nothing, and it is made again as the kubelet would, as the pod's next
# attempt, with twice the time.
ABANDON_AFTER = (8, 16, 32)


def abandoned_run(client: CriClient, node: Node, pod: PodSpec, added: Callable[[], object],
                  finish_bound: float) -> PodSpec:
    """RunPodSandbox of `pod`, given up by the client at its deadline while the delegate's ADD
    hangs, until the delegate's ADD had started by then (`added`); waits for the runtime to finish
    each abandoned request (within `finish_bound` s) and returns the attempt whose ADD started."""
    for n, deadline in enumerate(ABANDON_AFTER):
        tried = replace(pod, attempt=pod.attempt + n)
        mark = len(node.log_text())
        past_deadline(client.run_pod, tried, timeout=deadline)

        def finished(since: int = mark, run: PodSpec = tried) -> bool:
            return node.runtime.run_pod_finished(node.log_text()[since:], run.name, run.uid)

        wait_for(finished, f"{node.runtime.key} to finish the abandoned RunPodSandbox",
                 timeout=finish_bound, every=0.5)
        if added():
            return tried
        print(f"[abandoned_run] {node.runtime.key}: no delegate ADD within {deadline} s "
              f"(load {os.getloadavg()[0]:.0f}); the pod's next attempt")
    raise AssertionError(f"no delegate ADD started before the client gave up ({ABANDON_AFTER} s)")


def past_deadline(call: Any, *args: Any, timeout: float) -> grpc.RpcError:
    """Run a CRI call that the client gives up on after `timeout` s; return its error, having
    checked it was the deadline that ended it (not_by_deadline)."""
    started = time.monotonic()
    err = rpc_error(call, *args, timeout=timeout)
    why = not_by_deadline(err.code(), f"{details(err)} | {err.debug_error_string()}",
                          time.monotonic() - started, timeout)
    assert why is None, why
    return err


def markers(node: Node, container: str) -> list[Path]:
    """The guard's files for this container (marker, lock, tmp) under its state dir."""
    root = guard_state(node) / "networks" / NETWORK
    return sorted(root.glob(f"*{container}*")) if root.is_dir() else []


def assert_ready(client: CriClient, sandbox: str) -> None:
    status = client.pod_status(sandbox)
    assert client.state_name(status.state) == "SANDBOX_READY", status


def assert_name_reserved(node: Node, client: CriClient, pod: PodSpec, holder: str) -> None:
    err = details(rpc_error(client.run_pod, pod))
    assert node.runtime.messages.name_reserved in err, err
    assert node.runtime.messages.reserved_for.format(holder=holder) in err, err


def guard_del_lines(node: Node, container: str) -> list[dict[str, object]]:
    return records.guard_log(guard_log(node), command="DEL", containerID=container)


def skip_unless_failed_dels_block(node: Node) -> None:
    """For a test whose story needs a runtime that keeps retrying a DEL that failed."""
    import pytest

    from tests.e2e_cri.expected import expected

    if expected(node.runtime.key, "fake-stateful", "completed-del-fails", guarded=False) != "stuck":
        pytest.skip(f"{node.runtime.key} marks the network torn down after a DEL that failed "
                    "(the matrix's completed-del-fails): no DEL is retried, nothing blocks")
