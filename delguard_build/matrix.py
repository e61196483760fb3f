"""The matrix: what each runtime did in each end-to-end scenario, without and with the guard.

One row per (runtime, version, chain, driver, scenario, guard, kubernetes): its outcome, the
seconds it took, the Kubernetes release of a row a kubelet drove (None for CRI calls) and, with
the guard, how many DELs the guard answered without calling its delegate (`kept`, from its
decision log). A chain is what sat behind the guard in the run (chains.py). The e2e suites
write a run's rows into .cache/e2e/matrix.json (tests/support/matrix.py);
`tools/render.py --record` copies a run's file here as the file of record (matrix.json
beside this module), from which README.md and docs/compatibility.md render and the verdicts
`cni-delguard assess` ships are derived (verdicts.py). The file names the commit of the checkout
the run came from ("+dirty" when its tree had changes) and the UTC date of the run:

    {"commit": "<40 hex>[+dirty]", "date": "YYYY-MM-DD", "rows": [{...}, ...]}

A file of the older shape, a bare list of rows, is read too (commit and date unknown), and a row
that names its chain `delegate`, as files written before the rename do. The vocabularies are
closed: a row outside them is refused, never rendered or reasoned about. Pure, but for
`record()`, which reads the file of record.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

RUNTIMES = ("containerd", "cri-o")
# What sits behind the guard in a run (tests/e2e_cri/matrix_chains.py builds each; chains.py
# here says what each one stands for on a node).
CHAINS = (
    "fake-stateful",  # a delegate that fails DEL once it holds no state
    "multus-thin",  # real multus thin, kube-ovn's conflist inline in `delegates`
    "multus-thin-path",  # real multus thin, kube-ovn's conflist by its path in `clusterNetwork`
    "multus-thick",  # real multus-shim and multus-daemon, `multusConfigFile: auto`
    "cozystack-multus-v4.2.3",  # the reported stack as a Cozystack v1.2.0 node has it: multus
    # v4.2.3 thick in auto mode before 05-cilium.conflist (real kube-ovn, portmap, real cilium-cni)
    "cozystack-multus-v4.3.0",  # the same with multus v4.3.0
)
# cri: CRI calls written by the test; kubelet: a real kubelet, standalone; cluster: a one-node
# cluster (API server, controllers, scheduler, a registered kubelet; tests/e2e_cluster)
DRIVERS = ("cri", "kubelet", "cluster")
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
    "kube-ovn-ovsdb-down-del",  # kube-ovn's OVSDB unhealthy: its daemon fails every DEL at 30 s
    # while a pod is deleted, multus's daemon restarting meanwhile (a real kubelet's deadlines)
    "multus-restart",  # multus's daemon stopped (its 00-multus.conf removed) while a pod is
    # deleted, kube-ovn's daemon down too; multus's daemon back some seconds later
    "reboot-20-pods",  # a node rebooted with 20 pods running: every old sandbox's DELs and the
    # new sandboxes' ADDs at once, through multus's daemon under its CPU limit
    "kube-ovn-lifetimes",  # how long kube-ovn's OVS port and the pod's IP outlive a pod deleted
    # through multus in auto mode, and a reboot (each lifetime a fact of the run)
    "go-cni-stall",  # a 200 s ADD while multus's daemon rewrites its conf: how long the node's
    # other RunPodSandbox, StopPodSandbox and Status wait on the runtime's CNI lock
    "stale-conf-power-cut",  # a power cut leaving 00-multus.conf on disk, multus's daemon back
    # 70 s after the boot (its shim's "timed out waiting for the condition")
    "slow-add-150s",  # a pod whose ADD succeeds after 150 s, under the kubelet's 240 s deadline
    "slow-add-200s",  # ... after 200 s
    "slow-add-230s",  # ... after 230 s
)
# The windows of the reported stack (multus thick in auto mode before kube-ovn), run on its
# chains alone
REPORTED_SCENARIOS = ("kube-ovn-down-at-boot", "kube-ovn-ovsdb-down-del", "multus-restart",
                      "reboot-20-pods", "kube-ovn-lifetimes", "go-cni-stall",
                      "stale-conf-power-cut")
# Slow ADDs against the kubelet's RunPodSandbox deadline: run under a real kubelet alone
# (tests/e2e_kubelet/slow_add.py), never by the CRI suite.
SLOW_ADD_SCENARIOS = ("slow-add-150s", "slow-add-200s", "slow-add-230s")
OUTCOMES = (
    "removed",  # the stale sandbox is gone (and its pod can start again)
    "stuck",  # it cannot be removed: the deadlock
    "error-returned",  # the delegate's DEL error reached the runtime, as it must
    "released",  # removed after an operator's release
    "running",  # a pod whose ADD is slow: Ready (slow-add-*)
    "not-running",  # not Ready by the kubelet's deadline and a retry: its ADD was cut
)
UNKNOWN = "unknown"  # the commit or date of a file of the older shape


class MatrixError(ValueError):
    """A matrix file that is not one (its shape, or a row outside the vocabularies)."""


@dataclass(frozen=True)
class Row:
    runtime: str
    version: str
    chain: str
    scenario: str
    guard: bool
    outcome: str
    seconds: float
    driver: str = "cri"
    # With the guard: the DELs it answered without calling the delegate (its log's `skip`s);
    # None without the guard, or when the run did not count them.
    kept: int | None = None
    # The Kubernetes release whose kubelet (and control plane) drove the run, "v1.37.2": set by
    # the kubelet and cluster drivers, which run on several minors; None for CRI calls, and in
    # the rows of files written before the suites ran more than one (they ran v1.35.4).
    kubernetes: str | None = None

    def __post_init__(self) -> None:
        for name, allowed in (("runtime", RUNTIMES), ("chain", CHAINS),
                              ("driver", DRIVERS), ("scenario", SCENARIOS),
                              ("outcome", OUTCOMES)):
            if getattr(self, name) not in allowed:
                raise MatrixError(f"matrix: {name} {getattr(self, name)!r} is not one of "
                                  f"{allowed}")
        if not isinstance(self.version, str) or not self.version or not isinstance(
                self.guard, bool) or not _number(self.seconds) or self.seconds < 0:
            raise MatrixError(f"matrix: bad row {self}")
        if self.kept is not None and (isinstance(self.kept, bool) or not isinstance(
                self.kept, int) or self.kept < 0 or not self.guard):
            raise MatrixError(f"matrix: bad kept count in {self}")
        if self.kubernetes is not None and (not isinstance(self.kubernetes, str) or not
                                            self.kubernetes or self.driver == "cri"):
            raise MatrixError(f"matrix: bad Kubernetes release in {self}")

    @property
    def key(self) -> tuple[str, str, str, str, str, bool, str]:
        return (self.runtime, self.version, self.chain, self.driver, self.scenario, self.guard,
                self.kubernetes or "")

    def as_dict(self) -> dict[str, Any]:
        row = asdict(self)
        for name in ("kept", "kubernetes"):
            if row[name] is None:
                del row[name]  # rows of runs that did not say stay as they were
        return row


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
        value)


_FIELDS = {f.name for f in fields(Row)}


@dataclass(frozen=True)
class Matrix:
    commit: str
    date: str
    rows: tuple[Row, ...]

    def as_dict(self) -> dict[str, Any]:
        ordered = sorted(self.rows, key=lambda r: r.key)
        return {"commit": self.commit, "date": self.date, "rows": [r.as_dict() for r in ordered]}

    def dumps(self) -> str:
        return json.dumps(self.as_dict(), indent=1) + "\n"

    @property
    def short_commit(self) -> str:
        """The commit as a page shows it: 12 hex digits, "+dirty" kept."""
        head, dirty, tail = self.commit.partition("+")
        return head[:12] + dirty + tail if _hex(head) else self.commit


def _hex(text: str) -> bool:
    return len(text) >= 12 and all(c in "0123456789abcdef" for c in text)


def parse(data: object) -> Matrix:
    """A matrix from its JSON value: the current shape or a bare list of rows."""
    if isinstance(data, list):
        return Matrix(UNKNOWN, UNKNOWN, _rows(data))
    if not isinstance(data, dict) or set(data) != {"commit", "date", "rows"}:
        raise MatrixError("matrix.json: not {commit, date, rows} nor a list of rows")
    commit, date = data["commit"], data["date"]
    if not isinstance(commit, str) or not commit or not isinstance(date, str) or not date:
        raise MatrixError("matrix.json: commit and date must be strings")
    if not isinstance(data["rows"], list):
        raise MatrixError("matrix.json: rows is not a list")
    return Matrix(commit, date, _rows(data["rows"]))


def _rows(items: list[Any]) -> tuple[Row, ...]:
    rows = []
    for given in items:
        item = given
        if isinstance(given, dict) and "delegate" in given and "chain" not in given:
            item = {("chain" if k == "delegate" else k): v for k, v in given.items()}
        if not isinstance(item, dict) or not set(item) <= _FIELDS:
            raise MatrixError(f"matrix.json: not a row: {item!r}"[:300])
        try:
            rows.append(Row(**item))
        except TypeError as exc:  # a field missing
            raise MatrixError(f"matrix.json: {exc}") from None
    keys = [r.key for r in rows]
    if len(set(keys)) != len(keys):
        raise MatrixError("matrix.json: two rows of one key")
    return tuple(rows)


def loads(text: str) -> Matrix:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise MatrixError(f"matrix.json: not JSON: {exc}") from None
    return parse(data)


RECORD = "delguard_build/matrix.json"  # relative to the repository


def record() -> Matrix:
    """The file of record (beside this module)."""
    return loads((Path(__file__).parent / "matrix.json").read_text(encoding="utf-8"))
