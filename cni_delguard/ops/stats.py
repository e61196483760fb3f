"""`cni-delguard stats`: a summary of the decision log for the person on the node.

Counts per command and decision, the deadlock breaks (DELs the guard answered with success
although the delegate failed, each with the delegate's error), what observe mode would have
done, and the attachments whose DELs the guard answered without the delegate's success (repeats
of one attachment collapsed), read from the JSON-lines log and its rotated `.1`. Any file and any
bytes give a summary or one line on stderr (exit 2), never a traceback; control characters from
the log are shown escaped.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from datetime import UTC, datetime

from cni_delguard.guard import decide, defaults
from cni_delguard.host import layouts
from cni_delguard.node import options
from cni_delguard.ops import logread
from cni_delguard.ops.logread import LogError, LogReader
from cni_delguard.ops.text import as_json, clean
from cni_delguard.tooling import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TextIO

    # `stats --prometheus FILE`: writes the textfile (path, log file, state dir). The monitoring
    # package (floor 5) has it; cni_delguard.cli connects it, as ops/ (floor 4) cannot import it.
    Textfile = Callable[[str, str, str], None]

# DEL decisions answered without the delegate's success: skipped (not called), or forwarded with
# failures ignored; `released` is an operator's release valve (ops/release.py), counted the same
# way.
UNBLOCKED = ("skip", "forward-lenient", "released")
_TS = "%Y-%m-%dT%H:%M:%SZ"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_MAX_DIGITS = 12  # 10**12 s is 31 700 years: anything longer reaches before 1970 anyway


class Tally:
    """What the log says, folded one record at a time, with every break and unblocked
    attachment kept for the listing (the metrics fold the log into monitoring/counts.py instead)."""

    def __init__(self, since: str | None = None, network: str | None = None) -> None:
        self.since = since
        self.network = network
        self.records = 0
        self.counts: Counter[tuple[str, str]] = Counter()
        self.breaks: list[dict[str, Any]] = []
        self.would_skip = 0
        self.would_free = 0
        self.unblocked: dict[tuple[str, str, str], dict[str, Any]] = {}

    def wants(self, rec: dict[str, Any]) -> bool:
        if self.network is not None and rec.get("network") != self.network:
            return False
        if self.since is not None:
            ts = rec.get("ts")
            return isinstance(ts, str) and ts >= self.since
        return True

    def add(self, rec: dict[str, Any]) -> None:
        if not self.wants(rec):
            return
        self.records += 1
        command, decision = _label(rec.get("command")), _label(rec.get("decision"))
        self.counts[(command, decision)] += 1
        if command != "DEL":
            return
        if decision == defaults.OBSERVE:
            self.would_skip += rec.get("wouldDecide") == "skip"
            self.would_free += rec.get("wouldFree") is True
        elif decision in UNBLOCKED:
            self._unblocked(rec, decision)

    def _unblocked(self, rec: dict[str, Any], decision: str) -> None:
        error = _delegate_error(rec)
        entry = _attachment(rec)
        ts = logread.text(rec.get("ts"))
        if decision in decide.BREAKS and error is not None:
            self.breaks.append(
                {
                    **entry,
                    "ts": ts,
                    "decision": decision,
                    "delegateError": error,
                    "reason": logread.text(rec.get("reason")),
                }
            )
        key = (entry["network"], entry["containerID"], entry["ifname"])
        seen = self.unblocked.get(key)
        if seen is None:
            seen = self.unblocked[key] = {**entry, "first": ts, "count": 0}
        seen.update(last=ts, decision=decision, count=seen["count"] + 1)
        if error is not None:
            seen["delegateError"] = error


def _label(value: object) -> str:
    return value if isinstance(value, str) else "?"


def _attachment(rec: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {k: _str(rec.get(k)) for k in ("network", "containerID", "ifname")}
    entry["pod"] = _str(rec.get("pod")) or None
    return entry


def _str(value: object) -> str:
    """A string field, or "" for anything else (a number there is not the guard's: never
    str()ed, which fails on an integer of more than 4300 digits)."""
    return logread.text(value) or ""


def _delegate_error(rec: dict[str, Any]) -> dict[str, Any] | None:
    err = rec.get("delegateError")
    if not isinstance(err, dict):
        return None
    return {"code": logread.error_code(err.get("code")), "msg": _str(err.get("msg"))}


def read(path: str, since: str | None = None, network: str | None = None) -> tuple[Tally, int]:
    """(the tally, malformed lines); LogError when the log cannot be read at all."""
    reader = LogReader(path)
    tally = Tally(since, network)
    for rec in reader:
        tally.add(rec)
    return tally, reader.malformed


def summarize(
    path: str, last: int, since: str | None = None, network: str | None = None
) -> dict[str, Any]:
    tally, malformed = read(path, since, network)
    attachments = sorted(tally.unblocked.values(), key=lambda e: _str(e["last"]))
    return {
        "log": path,
        "records": tally.records,
        "malformedLines": malformed,
        "decisions": {f"{c} {d}": n for (c, d), n in sorted(tally.counts.items())},
        "deadlockBreaks": len(tally.breaks),
        "lastDeadlockBreaks": tally.breaks[-last:] if last else [],
        "observe": {"wouldHaveSkipped": tally.would_skip, "wouldHaveFreed": tally.would_free},
        "unblockedAttachments": len(attachments),
        "lastUnblockedDels": attachments[-last:] if last else [],
    }


def parse_since(value: str, now: float | None = None) -> str:
    """`30m`, `2h`, `7d` ago, or a UTC time `2026-11-25T10:00:00Z` / a day `2026-11-25`. A
    duration that reaches before 1970 (no log line is older) is a usage error, as is any other
    value: checked before gmtime(), which fails on such numbers with OSError or OverflowError."""
    unit, digits = value[-1:], value[:-1]
    if unit in _UNITS and digits.isascii() and digits.isdigit():
        now = time.time() if now is None else now
        # The length check first: int() refuses more than 4300 digits (ValueError).
        seconds = int(digits) * _UNITS[unit] if len(digits) <= _MAX_DIGITS else None
        if seconds is None or seconds > now:
            raise argparse.ArgumentTypeError(
                f"--since {value[:40]!r} reaches before 1970: give a shorter duration"
            )
        return time.strftime(_TS, time.gmtime(now - seconds))
    for fmt in (_TS, "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"):
        try:
            parsed = datetime.strptime(value, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
        return parsed.strftime(_TS)
    raise argparse.ArgumentTypeError(
        f"--since {value!r}: give a duration (30m, 2h, 7d) or a UTC time (2026-11-25T10:00:00Z)"
    )


SUMMARY = "summarize the decision log"
DESCRIPTION = (
    "Counts per command and decision, the deadlock breaks with the delegate's "
    "error, observe mode's would-have counts, and the last attachments whose DELs the guard "
    "answered without the delegate's success, from the JSON-lines decision log."
)


def register(sub: Any, textfile: Textfile | None = None) -> None:
    """Add `stats` to cni_delguard.cli's subcommands; `textfile` writes `--prometheus FILE`."""
    parser = options.command(sub, "stats", run, SUMMARY, DESCRIPTION)
    parser.set_defaults(textfile=textfile)
    options.add(parser, "root")
    layouts.add_option(parser)
    options.add(parser, "log_file")
    parser.add_argument(
        "--last", type=int, default=10, metavar="N", help="how many entries to list (10)"
    )
    parser.add_argument("--since", type=parse_since, metavar="WHEN", help="30m, 2h, 7d or a time")
    parser.add_argument("--network", metavar="NAME", help="only this network's decisions")
    options.add(parser, "json")
    parser.add_argument(
        "--prometheus",
        metavar="FILE",
        help="write node-exporter textfile metrics to FILE (atomically) instead of a summary",
    )
    options.add(
        parser,
        "state_dir",
        state_dir={
            "help": "the guard's stateDir, for the markers in --prometheus "
            f"(the layout's: {defaults.STATE_DIR})"
        },
    )


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        log_file = layouts.guard_path(args, "log_file")
        state_dir = layouts.guard_path(args, "state_dir")
    except UsageError as exc:
        stderr.write(f"cni-delguard stats: {clean(exc)}\n")
        return 2
    if args.prometheus:
        if args.textfile is None:
            stderr.write("cni-delguard stats: --prometheus: this build has no metrics connected\n")
            return 2
        try:
            args.textfile(args.prometheus, log_file, state_dir)
        except OSError as exc:
            stderr.write(f"cni-delguard stats: cannot write {clean(args.prometheus)}: {exc}\n")
            return 2
        stdout.write(f"wrote {clean(args.prometheus)}\n")
        return 0
    try:
        summary = summarize(log_file, max(args.last, 0), args.since, args.network)
    except LogError as exc:
        stderr.write(f"cni-delguard stats: {clean(exc)}\n")
        return 2
    if args.json:
        stdout.write(as_json(summary))
    else:
        stdout.write("\n".join(_text(summary, log_file)) + "\n")
    return 0


def _text(summary: dict[str, Any], log: str) -> list[str]:
    lines = [f"{summary['records']} decisions in {clean(log)}"]
    if summary["malformedLines"]:
        lines[0] += f" ({summary['malformedLines']} malformed lines skipped)"
    lines += [f"  {n:8d}  {clean(what)}" for what, n in summary["decisions"].items()]
    obs = summary["observe"]
    if obs["wouldHaveSkipped"] or obs["wouldHaveFreed"]:
        lines.append(
            f"observe mode: would have skipped {obs['wouldHaveSkipped']} DELs, "
            f"would have freed {obs['wouldHaveFreed']} (the delegate failed them)"
        )
    lines.append(
        f"deadlock breaks (delegate failed, DEL answered success): {summary['deadlockBreaks']}"
    )
    for b in summary["lastDeadlockBreaks"]:
        err = b["delegateError"]
        lines.append(
            f"  {clean(b['ts'])}  {_who(b)}  delegate error {clean(err['code'])}: "
            f"{clean(err['msg'])}"
        )
    lines.append(
        f"attachments whose DELs were answered without the delegate's success: "
        f"{summary['unblockedAttachments']}"
    )
    for a in summary["lastUnblockedDels"]:
        times = f" x{a['count']}" if a["count"] > 1 else ""
        lines.append(f"  {clean(a['last'])}  {clean(a['decision']):15s} {_who(a)}{times}")
    return lines


def _who(entry: dict[str, Any]) -> str:
    who = f"{clean(entry['network'])} {clean(entry['containerID'])} {clean(entry['ifname'])}"
    return f"{who} pod {clean(entry['pod'])}" if entry.get("pod") else who
