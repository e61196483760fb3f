"""The matrix: what each runtime did in each scenario, without and with the guard.

Every end-to-end scenario records one row when it ends: which runtime (and its version, as the
binary reports it), which delegate chain, which driver (CRI calls written by the test, or a real
kubelet), the scenario, whether the guard was in front, the outcome and how long it took. Rows go
into .cache/e2e/matrix.json (DELGUARD_E2E_CACHE moves the dir), one per key, a later run's row
replacing an earlier one's; README's per-runtime table is rendered from that file, and a test
fails when they disagree. The vocabularies are closed: a row outside them is refused here, not
written.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

RUNTIMES = ("containerd", "cri-o")
# multus-thin: kube-ovn inline in multus thin's `delegates`; multus-thin-path: the same conflist
# named by its path in `clusterNetwork` (tests/support/multus.py Thin); multus-thick-auto: the
# reported stack (tests/support/reported_stack.py): multus v4.3.0 thick with `multusConfigFile:
# auto` before the real kube-ovn CNI and portmap, its daemon under a 100m CPU limit;
# multus-thick-auto-v4.2.3: the same with multus v4.2.3, the version of the report
DELEGATES = ("fake-stateful", "multus-thin", "multus-thin-path", "multus-thick",
             "multus-thick-auto", "multus-thick-auto-v4.2.3")
DRIVERS = ("cri", "kubelet")
SCENARIOS = (
    "double-del",  # a pod deleted normally; the delegate forgets its state after a good DEL
    "kill-mid-add",  # the runtime killed while ADD runs
    "reboot",  # the node rebooted while ADD ran: netns and /run gone
    "add-fails",  # the delegate's ADD fails at once
    "client-deadline",  # the client (kubelet) gives up while ADD hangs
    "completed-del-fails",  # a completed ADD whose DEL keeps failing
    "release",  # the same, then `cni-delguard release`
    "del-error-propagates",  # a normal pod whose delegate's DEL error must come back
    "installer",  # the DaemonSet's pod template run by the kubelet: a pod created after the
    # install, deleted (guard true), and one created after the uninstall overlay (guard false)
    "kube-ovn-down-at-boot",  # a node rebooted with a pod running; kube-ovn's daemon comes back
    # only some time after the node (the pod's new ADD fails meanwhile)
    "kube-ovn-hangs-del",  # kube-ovn's daemon accepts a DEL and never answers (unhealthy OVSDB)
    # while a pod is deleted, multus's daemon restarting meanwhile (a real kubelet's deadlines)
    "multus-restart",  # multus's daemon stopped (its 00-multus.conf removed) while a pod is
    # deleted, kube-ovn's daemon down too; multus's daemon back some seconds later
    "reboot-20-pods",  # a node rebooted with 20 pods running: every old sandbox's DELs and the
    # new sandboxes' ADDs at once, through multus's daemon under its CPU limit
)
OUTCOMES = (
    "removed",  # the stale sandbox is gone (and its pod can start again)
    "stuck",  # it cannot be removed: the deadlock
    "error-returned",  # the delegate's DEL error reached the runtime, as it must
    "released",  # removed after an operator's release
)


def path() -> Path:
    cache = Path(os.environ.get("DELGUARD_E2E_CACHE", str(REPO / ".cache" / "e2e")))
    return cache / "matrix.json"


@dataclass(frozen=True)
class Row:
    runtime: str
    version: str
    delegate: str
    scenario: str
    guard: bool
    outcome: str
    seconds: float
    driver: str = "cri"

    def __post_init__(self) -> None:
        for name, allowed in (("runtime", RUNTIMES), ("delegate", DELEGATES),
                              ("driver", DRIVERS), ("scenario", SCENARIOS),
                              ("outcome", OUTCOMES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"matrix: {name} {getattr(self, name)!r} is not one of {allowed}")
        if not self.version or not isinstance(self.guard, bool) or self.seconds < 0:
            raise ValueError(f"matrix: bad row {self}")

    @property
    def key(self) -> tuple[str, str, str, str, str, bool]:
        return (self.runtime, self.version, self.delegate, self.driver, self.scenario, self.guard)


def load(where: Path | None = None) -> list[Row]:
    """The rows of the last matrix (none when there is no file yet)."""
    try:
        data = json.loads((where or path()).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    if not isinstance(data, list):
        raise TypeError("matrix.json: not a list")
    return [Row(**item) for item in data]


@contextlib.contextmanager
def _locked(target: Path) -> Iterator[None]:
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def record(row: Row, where: Path | None = None) -> None:
    """Put row into the matrix, replacing the row of the same key; atomic, serialized."""
    target = where or path()
    with _locked(target):
        rows = {r.key: r for r in load(target)}
        rows[row.key] = row
        ordered = sorted(rows.values(), key=lambda r: r.key)
        fd, tmp = tempfile.mkstemp(prefix=".matrix-", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump([asdict(r) for r in ordered], out, indent=1)
            out.write("\n")
        os.replace(tmp, target)
