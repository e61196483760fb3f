"""cilium-agent on a node of the reported stack (tests/support/reported_stack.py): the stand-in,
tests/fakes/cilium_agent.py, run in the node's mount namespace as its DaemonSet pod runs on a
Cozystack v1.2.0 node; it writes 05-cilium.conflist once its API serves. What cilium-cni does
while it is away (its deletion queue, its ADD waiting and failing) is the real plugin's own code.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.daemon import Daemon, Record
from tests.support.records import read_jsonl
from tests.support.waiting import wait_for

AGENT = Path(__file__).resolve().parents[1] / "fakes" / "cilium_agent.py"
CILIUM_QUEUE = "/run/cilium/deleteQueue"  # inside the node (cilium pkg/defaults/defaults.go:98)
# Its endpoint state under its runtime dir, so it goes with the node's /run at a power-off as
# the agent's /var/run/cilium/state does (its hostPath /var/run/cilium is /run's, a tmpfs).
CILIUM_STATE = "/run/cilium/state"
# cilium-agent's API serves this long after its pod starts at a boot: it is a DaemonSet pod,
# down with the node, and its init containers (config, which builds its config from the API
# server, mount-cgroup, apply-sysctl-overwrites, mount-bpf-fs, clean-cilium-state,
# install-cni-binaries) run before the agent, which restores its endpoints and replays the
# deletion queue before its API serves (cozystack v1.2.0 packages/system/cilium/charts/cilium/
# templates/cilium-agent/daemonset.yaml; cilium v1.19.1 pkg/endpoint/api/
# endpoint_deletion_queue.go). Meanwhile the plugin sees /run/cilium without a socket: its
# DEL waits for the agent and then queues (plugins/cilium-cni/lib/deletion_queue.go), its ADD
# waits up to 30 s and fails (code 999) when the agent is not back by then.
CILIUM_BOOT = 10


@dataclass
class CiliumAgent:
    """The stand-in for cilium-agent, run in the node (tests/fakes/cilium_agent.py): up, down
    (SIGTERM: its socket goes, /run/cilium and the deletion queue stay) or booting (its API
    serves only `after` seconds after its start). It writes 05-cilium.conflist once it serves."""

    work: Path
    run: Path  # the node's /run as the host sees it
    conf: Path  # where it writes its conflist (the host's view of the runtime's conf dir)
    proc: Daemon | None = None  # while it runs
    _process: Daemon | None = None

    @property
    def record(self) -> Path:
        return self.work / "cilium-agent.jsonl"

    @property
    def queue(self) -> Path:
        return self.run / CILIUM_QUEUE.removeprefix("/run/")

    def start(self, enter: tuple[str, ...], after: float = 0) -> None:
        """Started in the node (`enter`: its mount namespace; it uses no network); with `after`,
        booting that long (not waited for)."""
        assert self.proc is None
        argv = [*enter, sys.executable, "-I", str(AGENT), "--state", CILIUM_STATE,
                "--record", str(self.record), "--start-after", str(after),
                "--write-cni-conf", str(self.conf)]
        if self._process is None:
            self._process = Daemon(
                "cilium-agent", argv, self.work / "cilium-agent.out",
                ready=Record(self.record, lambda r: r.get("phase") == "listening", "listening"))
        self._process.argv = argv
        self.proc = self._process
        self._process.start(wait=after == 0)
        if after == 0:  # it writes the conflist just after its "listening" record
            wait_for(self.conf.exists, "cilium-agent to write 05-cilium.conflist", timeout=30,
                     every=0.05)

    def stop(self) -> None:
        """Down: SIGTERM, as the kubelet stops its container."""
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    def node_down(self) -> None:
        """Killed with the node (its socket, state and queue went with the node's /run)."""
        if self.proc is not None:
            self.proc.reap()
            self.proc = None

    def deletes(self, container: str | None = None) -> int:
        """The endpoint deletions that reached its API (of one container)."""
        return len([r for r in read_jsonl(self.record)
                    if r.get("method") == "DELETE" and r.get("path") == "/v1/endpoint"
                    and container in (None, (r.get("request") or {}).get("container-id"))])

    def replayed(self) -> int:
        """The deletions the plugin queued while it was down, replayed at its starts."""
        return len([r for r in read_jsonl(self.record) if r.get("phase") == "replayed"])
