"""The "fake-stateful" chain: tests/fakes/stale_delegate.py straight behind the guard.

The fake stands for the seed report's delegate (kube-ovn behind multus, as BACKGROUND.md tells it):
it keeps one state file per attachment, written by ADD and removed by a successful DEL, and fails a
DEL for which it holds no state ("server_socket is required in cni.conf"). So a second DEL after a
good one fails. Real multus v4.3.0 in front of a kube-ovn-like delegate never fails a DEL for want
of its cache (the multus chains of tests/e2e_cri measure what it does instead), so this behaviour
comes from no installable part: hence a fake (no current release of a real plugin is known to fail
a repeated DEL; tests/fakes/stale_delegate.py's header names the older ones that did). Debian's
bridge + host-local follow it in the
conflist, outside the guard, so that a pod that starts has the eth0 (and IP) a runtime wants; its
bridge device is this chain's own and stop() deletes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
from pathlib import Path
from typing import Any

from tests.support.chains import Behaviour, Pod
from tests.support.confs import stale_delegate
from tests.support.fakes import install_fake
from tests.support.records import fake_calls

SUBNET = "10.251.73.0/24"  # only inside the pods' netns and on a bridge without an address


class FakeStateful:
    delegate = "fake-stateful"
    cni_version = "1.0.0"

    def __init__(self) -> None:
        self.work: Path | None = None

    def start(self, bin_dir: Path, work: Path, cni_cache: Path) -> None:
        install_fake(bin_dir)
        work.mkdir(parents=True, exist_ok=True)
        self.work = work

    def _work(self) -> Path:
        if self.work is None:
            raise RuntimeError("FakeStateful: start() first")
        return self.work

    @property
    def record(self) -> Path:
        return self._work() / "fake-record.jsonl"

    @property
    def state_dir(self) -> Path:
        return self._work() / "fake-state"

    @property
    def bridge(self) -> str:
        """This chain's bridge device (IFNAMSIZ allows 15 characters)."""
        return "dgf" + hashlib.sha256(str(self._work()).encode()).hexdigest()[:10]

    def plugins(self, behaviour: Behaviour) -> list[dict[str, Any]]:
        knobs: dict[str, Any] = {}
        if behaviour.hang:
            knobs |= {"hang": list(behaviour.hang), "hangSeconds": behaviour.hang_seconds}
        if behaviour.fail_add is not None:
            knobs["failAdd"] = behaviour.fail_add
        if behaviour.fail_del is not None:
            knobs["failDel"] = behaviour.fail_del
        fake = stale_delegate(self.state_dir, self.record, **knobs)
        bridge = {"type": "bridge", "bridge": self.bridge, "isGateway": False, "ipMasq": False,
                  "ipam": {"type": "host-local", "dataDir": str(self._work() / "ipam"),
                           "ranges": [[{"subnet": SUBNET}]]}}
        return [fake, bridge]

    def pod_exists(self, pod: Pod, exists: bool) -> None:
        """No API: the fake reads nothing about pods."""

    def calls(
        self, command: str | None = None, container: str | None = None
    ) -> list[dict[str, Any]]:
        return fake_calls(self.record, command, containerID=container)

    def forget(self, container: str) -> None:
        for state in self.state_dir.glob(f"{container}:*"):
            state.unlink()

    def node_down(self) -> None:
        """Nothing of this chain runs in the node."""

    def node_up(self, enter: tuple[str, ...]) -> None:
        """Nothing of this chain runs in the node."""

    def stop(self) -> None:
        if self.work is None:
            return
        with contextlib.suppress(subprocess.CalledProcessError):
            shown = subprocess.run(["ip", "link", "show", self.bridge], capture_output=True,
                                   check=False)
            if shown.returncode == 0:
                subprocess.run(["ip", "link", "del", self.bridge], check=True,
                               capture_output=True)
