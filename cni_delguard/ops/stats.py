"""`cni-delguard stats`: a summary of the decision log for the person on the node.

Counts per command and decision, and the most recent DELs the guard answered without calling the
delegate (the sandboxes it unblocked), read from the JSON-lines log (and its rotated `.1`).
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter

from cni_delguard.guard import defaults

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, TextIO


def _records(path: str) -> Iterator[dict[str, Any]]:
    for name in (path + ".1", path):
        try:
            with open(name, "rb") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(rec, dict):
                        yield rec
        except FileNotFoundError:
            continue


def summarize(path: str, last: int) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    skipped: list[dict[str, Any]] = []
    total = 0
    for rec in _records(path):
        total += 1
        counts[f"{rec.get('command', '?')} {rec.get('decision', '?')}"] += 1
        if rec.get("command") == "DEL" and rec.get("decision") in ("skip", "forward-lenient"):
            skipped.append(
                {
                    k: rec.get(k)
                    for k in ("ts", "decision", "network", "containerID", "ifname", "reason")
                }
            )
    return {
        "log": path,
        "records": total,
        "decisions": dict(sorted(counts.items())),
        "lastUnblockedDels": skipped[-last:] if last else [],
    }


def register(sub: Any) -> None:
    """Add `stats` to cni_delguard.cli's subcommands."""
    parser = sub.add_parser(
        "stats",
        help="summarize the decision log",
        description="Counts per command and decision, and the last DELs the guard answered "
        "without the delegate's success, from the JSON-lines decision log.",
    )
    parser.add_argument(
        "--log-file", default=defaults.LOG_FILE, metavar="FILE", help="the log (%(default)s)"
    )
    parser.add_argument(
        "--last", type=int, default=10, metavar="N", help="how many unblocked DELs to list (10)"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    if not os.path.exists(args.log_file) and not os.path.exists(args.log_file + ".1"):
        stderr.write(f"cni-delguard stats: no log at {args.log_file}\n")
        return 1
    summary = summarize(args.log_file, max(args.last, 0))
    if args.json:
        stdout.write(json.dumps(summary, indent=2) + "\n")
        return 0
    lines = [f"{summary['records']} decisions in {args.log_file}"]
    lines += [f"  {n:8d}  {what}" for what, n in summary["decisions"].items()]
    lines.append("last DELs answered without the delegate's success:")
    lines += [
        f"  {r['ts']}  {r['decision']:15s} {r['network']} {r['containerID']} {r['ifname']}"
        for r in summary["lastUnblockedDels"]
    ]
    stdout.write("\n".join(lines) + "\n")
    return 0
