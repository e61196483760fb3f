"""What sits behind the guard in the matrix, by the matrix's delegate name, and which scenarios
each chain runs.

fake-stateful (a delegate that fails DEL without state) runs every scenario: it is the report's
failure, reduced to the runtime's part. The real multus chains (tests/support/multus.py) run the
scenarios whose outcome depends on what multus does with a DEL, on every runtime; the others
would only repeat the runtime's part at several minutes each (see README.md here):

- multus-thin (kube-ovn inline): double-del (does multus's missing cache fail the second DEL?),
  reboot (a stale sandbox whose multus cache stayed on disk), del-error-propagates (a delegate's
  DEL error must come back through multus and the guard).
- multus-thin-path (kube-ovn's conflist by path: every DEL loses `server_socket`): double-del,
  reboot (the seed report's stale sandbox) and release (a completed ADD whose DEL keeps failing).
- multus-thick: double-del and del-error-propagates (its shim answers 0 to every DEL), reboot
  (the daemon, a DaemonSet pod, is killed with the node and comes back only after the kubelet's
  first cleanup of the stale sandbox: its DEL reaches a shim without a daemon).
"""

from __future__ import annotations

from collections.abc import Callable

from tests.e2e_cri.matrix_scenarios import SCENARIOS
from tests.e2e_cri.node import Node
from tests.support.chains import Chain
from tests.support.multus import MultusThick, MultusThin, Thin
from tests.support.runtimes import RUNTIMES, Runtime
from tests.support.stateful_chain import FakeStateful

CHAINS: dict[str, Callable[[Node], Chain]] = {
    "fake-stateful": lambda node: FakeStateful(),
    "multus-thin": lambda node: MultusThin(form=Thin.INLINE),
    "multus-thin-path": lambda node: MultusThin(form=Thin.CLUSTER_NETWORK_PATH),
    # the daemon runs in the node's mount namespace, where /var/lib/cni/multus is the node's,
    # with its socket in the node's /run (gone at a reboot, as on a real node)
    "multus-thick": lambda node: MultusThick(enter=node.enter, run=node.run),
}

RUNS: dict[str, tuple[str, ...]] = {
    "fake-stateful": tuple(SCENARIOS),
    "multus-thin": ("double-del", "reboot", "del-error-propagates"),
    "multus-thin-path": ("double-del", "reboot", "release"),
    "multus-thick": ("double-del", "reboot", "del-error-propagates"),
}


# The rows either side of containerd's CNIResult check (runtimes.BOUNDARY: v1.6.38 has it,
# v1.7.22 has not) run only the cases whose outcome that check can decide: a sandbox whose ADD
# never completed, made stale four ways with the fake, and through multus thin by path (the one
# chain whose DEL of such a sandbox fails: its reboot differs between 1.6.20 and 1.7.35). And
# double-del, whose second DEL comes after a completed ADD. Every other case has a completed
# ADD (which the check lets through on both sides) or nothing that fails a DEL (multus-thin,
# multus-thick): README.md here.
BOUNDARY: dict[str, tuple[str, ...]] = {
    "fake-stateful": ("double-del", "kill-mid-add", "reboot", "add-fails", "client-deadline"),
    "multus-thin-path": ("reboot",),
}


def cases(boundary: bool = False) -> list[tuple[str, str]]:
    """(chain, scenario) for every case a runtime row runs (a boundary row: BOUNDARY's), in the
    matrix's scenario order."""
    runs = BOUNDARY if boundary else RUNS
    return [(chain, s) for chain, ran in runs.items() for s in SCENARIOS if s in ran]


def runtime_cases() -> list[tuple[Runtime, str, str]]:
    """(runtime row, chain, scenario) for every case of the matrix."""
    return [(row, c, s) for row in RUNTIMES for c, s in cases(row.boundary)]
