"""`cni-delguard doctor`: what is wrong on this node, and what the guard will do about it.

Each check is a small function `check(node) -> list[Finding]`, independent of the others, in the
module of its family: `conf` (the runtime's conf, the plugins), `state` (the state dir, the
network dirs every tool skips, markers, locks), `caches` (multus and libcni caches), `logs` (the
decision log). CHECKS lists them in the order they are reported (one more check is one more line
there). A finding is `ok`, `info` or a `problem`; a problem that is safe to fix carries its
repair, which runs only with `--repair` and says what it did. Nothing here touches a valid
libcni result or a marker: the repairs are orphaned lock files (removed under their flock) and
invalid libcni caches (moved to `<stateDir>/quarantine/`, never deleted). Exit 0: healthy; 1:
problems left; 2: usage.
"""

from __future__ import annotations

import os

from cni_delguard.cni import errors
from cni_delguard.host import dirs, layouts
from cni_delguard.node import options
from cni_delguard.ops.doctor import caches, conf, logs, state
from cni_delguard.ops.doctor.node import PROBLEM, Finding, Node, discover
from cni_delguard.ops.text import as_json, clean
from cni_delguard.tooling import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any, TextIO

CHECKS: list[Callable[[Node], list[Finding]]] = [
    conf.check_conf,
    conf.check_plugins,
    state.check_state_dir,
    state.check_network_dirs,
    state.check_markers,
    state.check_locks,
    caches.check_multus_only,
    caches.check_multus_thick_cache,
    caches.check_result_caches,
    logs.check_log,
    logs.check_stuck,
]


def examine(node: Node, repair: bool) -> list[Finding]:
    findings = [f for check in CHECKS for f in check(node)]
    if repair:
        for f in findings:
            if f.severity == PROBLEM and f.repair is not None:
                try:
                    f.repaired = f.repair()
                except (OSError, errors.CniError) as exc:
                    f.repaired = f"failed: {exc}"
    return findings


def _left(f: Finding) -> bool:
    """A problem still there after --repair (a repair that left the file in place counts)."""
    return f.severity == PROBLEM and not (f.repaired or "").startswith(("removed", "moved"))


SUMMARY = "check this node and say what the guard will do"
DESCRIPTION = (
    "What is wrong on this node (conf, plugin, state dir, markers, locks, "
    "caches, the log) and what the guard will do about it. Exit 0: healthy; 1: problems. "
    "--repair fixes only what is safe to fix and says what it did."
)


def register(sub: Any) -> None:
    """Add `doctor` to cni_delguard.cli's subcommands."""
    parser = options.command(sub, "doctor", run, SUMMARY, DESCRIPTION)
    options.add(parser, "root")
    layouts.add_option(parser)
    options.add(parser, "conf_dir", "bin_dir", "json")
    parser.add_argument(
        "--repair",
        action="store_true",
        help="fix what is safe: remove orphaned lock files, move invalid libcni caches to "
        "<stateDir>/quarantine (never deleted)",
    )


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    if not os.path.isdir(args.root):
        stderr.write(f"cni-delguard doctor: --root {clean(args.root)} is not a directory\n")
        return 2
    try:
        # No layout's conf (nor the guard) found: the standard layout, whose empty conf dir
        # the conf check then reports.
        node = discover(dirs.find(args.root, args.layout, conf_dir=args.conf_dir,
                                  bin_dir=args.bin_dir, standard_when_none=True))
    except UsageError as exc:
        stderr.write(f"cni-delguard doctor: {clean(exc)}\n")
        return 2
    findings = examine(node, args.repair)
    healthy = not any(_left(f) for f in findings)
    if args.json:
        # The node's dirs as seen from here (under --root): what a runbook reads them from.
        body = {"root": args.root, "layout": node.layout, "dirsFrom": node.source,
                "binDir": node.bin_dir, "confDir": node.conf_dir, "stateDir": node.state_dir,
                "logFile": node.log_file or None, "healthy": healthy,
                "findings": [f.as_dict() for f in findings]}
        stdout.write(as_json(body))
    else:
        stdout.write("\n".join(_text(node, findings, healthy)) + "\n")
    return 0 if healthy else 1


def _text(node: Node, findings: list[Finding], healthy: bool) -> list[str]:
    lines = [
        f"cni-delguard doctor: layout {node.layout}, conf dir {clean(node.conf_dir)}, "
        f"bin dir {clean(node.bin_dir)} (from the {clean(node.source)}), "
        f"state dir {clean(node.state_dir)}"
    ]
    for f in findings:
        lines.append(f"  {f.severity.upper():8s} {f.check:8s} {clean(f.message)}")
        if f.repaired is not None:
            lines.append(f"  {'':8s} {'':8s} repaired: {clean(f.repaired)}")
        elif f.repair is not None:
            lines.append(f"  {'':8s} {'':8s} (--repair fixes this)")
    problems = sum(f.severity == PROBLEM for f in findings)
    left = sum(_left(f) for f in findings)
    lines.append(
        "healthy"
        if healthy and not problems
        else f"{problems} problems, {problems - left} repaired"
        if healthy
        else f"{left} problems"
    )
    return lines
