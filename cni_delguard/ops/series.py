"""Every series cni-delguard exports, declared once: its name, kind, help text and labels, and
which part of the node has its value.

The scrape endpoint (`install --watch --metrics-address`) and the textfile (`stats --prometheus`,
`install --watch --metrics-file`) both render this table through prometheus-client
(ops/metrics.py); README's "Operating it" lists the same names (tests/unit/test_series.py keeps
them in step). A label's values come from a closed vocabulary (VOCABULARY): the decision log is a
file anyone with root can write, and a value from it that is not in the vocabulary is counted as
"other", so no file can make the label set grow. No pod name, container ID or free-text reason is
ever a label value.
"""

from __future__ import annotations

from dataclasses import dataclass

from cni_delguard.guard import decide
from cni_delguard.state.marker import ATTEMPTED, COMPLETED, CORRUPT, DELETING

PREFIX = "cni_delguard"
COUNTER, GAUGE, INFO = "counter", "gauge", "info"
# Who has a value: the decision log and the state dir can be read by anyone on the node (`stats
# --prometheus`); only the watching installer knows its own re-wraps and runs the ready check.
LOG, STATE, WATCH, BUILD = "log", "state", "watch", "build"
OTHER = "other"
# What a source reports: series name -> {label values: value}.
Values = dict[str, dict[tuple[str, ...], float]]

COMMANDS = ("ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION")
# Every decision the guard logs (cni_delguard/commands; test_series.py reads them from there).
DECISIONS = (
    decide.SKIP,
    decide.FORWARD_LENIENT,
    decide.FORWARD_STRICT,
    decide.RELEASED,
    "observe",
    "error",
    "add-completed",
    "add-failed",
    "forward",
    "status-unavailable",
)
STATES = (ATTEMPTED, COMPLETED, DELETING, CORRUPT)
VOCABULARY = {"command": COMMANDS, "decision": DECISIONS, "state": STATES}


@dataclass(frozen=True)
class Series:
    name: str  # after PREFIX_; a counter's without `_total`, an info's without `_info`
    kind: str
    help: str
    source: str
    labels: tuple[str, ...] = ()

    @property
    def exposed(self) -> str:
        """The name as Prometheus stores it."""
        suffix = {COUNTER: "_total", INFO: "_info"}.get(self.kind, "")
        return f"{PREFIX}_{self.name}{suffix}"


SERIES = (
    Series(
        "decisions",
        COUNTER,
        "decisions in the decision log, by command and decision",
        LOG,
        ("command", "decision"),
    ),
    Series(
        "deadlock_breaks",
        COUNTER,
        "DELs answered with success although the delegate failed (lenient or released)",
        LOG,
    ),
    Series(
        "released",
        COUNTER,
        "strict DELs answered with success on an operator's release record (a leak on purpose)",
        LOG,
    ),
    Series("observe_would_skip", COUNTER, "observe mode: DELs the guard would have skipped", LOG),
    Series(
        "observe_would_free",
        COUNTER,
        "observe mode: failed DELs the guard would have answered with success",
        LOG,
    ),
    Series(
        "stuck_strict_dels",
        GAUGE,
        "attachments whose strict DEL has kept failing for longer than the doctor's threshold "
        "(cni-delguard doctor lists each with its release command)",
        LOG,
    ),
    Series("log_readable", GAUGE, "1 when the decision log could be read at the last look", LOG),
    Series(
        "log_read_errors",
        COUNTER,
        "times the decision log could not be read (a log not written yet is not an error)",
        LOG,
    ),
    Series(
        "log_malformed_lines", COUNTER, "decision log lines that are not a JSON object", LOG
    ),
    Series("state_readable", GAUGE, "1 when the state dir could be read", STATE),
    Series("markers", GAUGE, "the guard's markers on this node, by state", STATE, ("state",)),
    Series(
        "oldest_attempted_age_seconds",
        GAUGE,
        "age of the oldest attempted marker (an ADD that never completed); 0 when none",
        STATE,
    ),
    Series(
        "node_guarded",
        GAUGE,
        "1 while the node is guarded: the answer of `cni-delguard ready`",
        WATCH,
    ),
    Series(
        "ready_code",
        GAUGE,
        "exit code of the ready check: 0 guarded, 10 conf not wrapped, 11 plugin missing or "
        "incomplete, 12 plugin does not run, 13 uninstalled",
        WATCH,
    ),
    Series(
        "rewraps",
        COUNTER,
        "times the watcher wrapped the conf (at start, and after another writer changed it)",
        WATCH,
    ),
    Series("repairs", COUNTER, "times the watcher repaired a damaged or missing bundle", WATCH),
    Series(
        "backoffs",
        COUNTER,
        "times the watcher backed off from a writer that keeps undoing the wrap",
        WATCH,
    ),
    Series(
        "watch_errors",
        COUNTER,
        "re-wraps and repairs that failed (the watcher tries again on the next change)",
        WATCH,
    ),
    Series(
        "build", INFO, "the running cni-delguard's version and CPU arch", BUILD, ("version", "arch")
    ),
)


def label(name: str, value: object) -> str:
    """`value` when the label's vocabulary has it, else "other"."""
    return value if isinstance(value, str) and value in VOCABULARY[name] else OTHER
