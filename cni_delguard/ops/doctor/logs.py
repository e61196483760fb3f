"""doctor's checks of the decision log: the last deadlock breaks, each with the delegate's error,
and strict DELs that keep failing, each with the `release` command that would free it."""

from __future__ import annotations

from cni_delguard.ops import stats, stuck
from cni_delguard.ops.doctor.node import INFO, PROBLEM, Finding, Node
from cni_delguard.ops.logread import LogError, LogReader

LAST_BREAKS = 5


def check_log(node: Node) -> list[Finding]:
    """The last deadlock breaks in the log, each with the delegate's error."""
    if not node.log_file:
        return [Finding("log", INFO, 'the decision log is turned off (logFile "")')]
    try:
        tally, malformed = stats.read(node.log_file)
    except LogError as exc:
        return [Finding("log", INFO, str(exc), node.log_file)]
    found = [
        Finding(
            "log",
            INFO,
            f"{len(tally.breaks)} deadlock breaks in the log (DELs the "
            "delegate failed, answered with success)",
            node.log_file,
        )
    ]
    for b in tally.breaks[-LAST_BREAKS:]:
        err = b["delegateError"]
        pod = f" pod {b['pod']}" if b.get("pod") else ""
        found.append(
            Finding(
                "log",
                INFO,
                f"{b['ts']} {b['network']} {b['containerID']} "
                f"{b['ifname']}{pod}: delegate error {err['code']}: {err['msg']}",
            )
        )
    if malformed:
        found.append(Finding("log", INFO, f"{malformed} malformed lines in the log", node.log_file))
    return found


def check_stuck(node: Node) -> list[Finding]:
    """Strict DELs failing again and again for longer than stuck.DEFAULT_THRESHOLD: a completed
    ADD the guard will not free by itself, each with the `release` command that would."""
    if not node.log_file:
        return []
    try:
        records = list(LogReader(node.log_file))
    except LogError:
        return []  # check_log says why
    found = []
    for s in stuck.find_stuck(records, node.now, root=node.root, state_dir=node.node_state_dir):
        pod = f" (pod {s.pod})" if s.pod else ""
        err = s.last_error
        found.append(
            Finding(
                "stuck",
                PROBLEM,
                f"{s.network} {s.container_id} {s.ifname}{pod}: {s.failures} strict DELs failed "
                f"since {s.as_dict()['since']}, last delegate error {err.get('code')}: "
                f"{err.get('msg')}. Repair the delegate, or accept the leak with: {s.command}",
                node.log_file,
            )
        )
    return found
