"""Every series cni-delguard exports, declared once: its name, kind, help text and labels, and
which part of the node has its value.

The scrape endpoint (`install --watch --metrics-address`) and the textfile (`stats --prometheus`,
`install --watch --metrics-file`) both render this table through prometheus-client
(monitoring/metrics.py); docs/monitoring.md lists the same names (tests/unit/test_series.py keeps
them in step). A label's values come from a closed vocabulary (VOCABULARY): the decision log is a
file anyone with root can write, and a value from it that is not in the vocabulary is counted as
"other", so no file can make the label set grow. No pod name, container ID or free-text reason is
ever a label value.

Every label set a series can have is exported from the start, at 0 (`Series.label_sets`): a
counter whose first sample is already 1 has no increase for Prometheus (`increase()` needs two
samples), so the first guard error of a watcher's life, and the first after every rollout, would
never page. Only `other` appears lazily: it is there only when something else wrote the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cni_delguard.guard import decide, defaults
from cni_delguard.state.marker import ATTEMPTED, COMPLETED, CORRUPT, DELETING

PREFIX = "cni_delguard"
COUNTER, GAUGE, INFO, HISTOGRAM = "counter", "gauge", "info", "histogram"
# Who has a value: the decision log and the state dir can be read by anyone on the node (`stats
# --prometheus`); only the watching installer knows its own re-wraps and runs the ready check.
LOG, STATE, WATCH, BUILD = "log", "state", "watch", "build"
OTHER = "other"

COMMANDS = ("ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION")
# Every decision the guard logs, by the command that logs it (cni_delguard/commands;
# test_series.py reads them from there). VERSION is answered without a log line.
DECISIONS_OF = {
    "ADD": ("add-completed", "add-failed"),
    "DEL": (
        decide.SKIP,
        decide.FORWARD_LENIENT,
        decide.FORWARD_STRICT,
        decide.RELEASED,
        defaults.OBSERVE,
        "error",
    ),
    "CHECK": ("forward",),
    "GC": ("forward",),
    "STATUS": ("forward", "status-unavailable"),
}
DECISIONS = tuple(dict.fromkeys(d for ds in DECISIONS_OF.values() for d in ds))
STATES = (ATTEMPTED, COMPLETED, DELETING, CORRUPT)
MODES = (defaults.ENFORCE, defaults.OBSERVE)
# The ready check's exit code as a state set (node/ready.py has the codes).
READY_REASONS = {
    0: "guarded",
    10: "conf-not-wrapped",
    11: "plugin-missing",
    12: "plugin-not-running",
    13: "uninstalled",
}
# The delegate calls whose duration is folded into a histogram: the two a pod's start and
# removal wait on (CHECK, GC and STATUS are forwarded too, but nobody waits on them: 2 x 19
# series a node rather than 5 x 19).
TIMED = ("ADD", "DEL")
# Seconds. Around the default timeouts (DEL 120, ADD 240) and the alert's 15 s, whose quantile
# must not fall inside a wide bucket; a multus thin DEL through a bridge takes 10 to 30 ms here.
BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 180.0,
           240.0)
VOCABULARY: dict[str, tuple[str, ...]] = {
    "command": COMMANDS,
    "decision": DECISIONS,
    "state": STATES,
    "mode": MODES,
    "reason": tuple(READY_REASONS.values()),
}


@dataclass
class Histogram:
    """Observations of one label set: counts per bucket of BUCKETS (not cumulative; the last
    is +Inf) and their sum."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    total: float = 0.0

    def observe(self, value: float) -> None:
        i = 0
        while i < len(BUCKETS) and value > BUCKETS[i]:
            i += 1
        self.counts[i] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, float]]:
        """[(le, count)] as the exposition wants them, +Inf last."""
        out, running = [], 0
        for bound, n in zip((*map(_go, BUCKETS), "+Inf"), self.counts, strict=True):
            running += n
            out.append((bound, float(running)))
        return out

    def copy(self) -> Histogram:
        return Histogram(list(self.counts), self.total)


def _go(bound: float) -> str:
    """A bucket's bound as every client library writes it (`le="0.5"`, `le="1.0"`)."""
    return repr(float(bound))


# What a source reports: series name -> {label values: value}.
Values = dict[str, dict[tuple[str, ...], float | Histogram]]


@dataclass(frozen=True)
class Series:
    name: str  # after PREFIX_; a counter's without `_total`, an info's without `_info`
    kind: str
    help: str
    source: str
    labels: tuple[str, ...] = ()
    # The label sets it has from the start, at 0; None: every combination of the labels'
    # vocabularies (for `decisions`, the pairs a command can log).
    label_sets: tuple[tuple[str, ...], ...] | None = None

    @property
    def exposed(self) -> str:
        """The name as Prometheus stores it."""
        suffix = {COUNTER: "_total", INFO: "_info"}.get(self.kind, "")
        return f"{PREFIX}_{self.name}{suffix}"

    def initial(self) -> tuple[tuple[str, ...], ...]:
        """Every label set this series has before anything happened."""
        if self.label_sets is not None:
            return self.label_sets
        sets: list[tuple[str, ...]] = [()]
        for name in self.labels:
            sets = [(*s, v) for s in sets for v in VOCABULARY[name]]
        return tuple(sets)


DECISION_PAIRS = tuple((c, d) for c, ds in DECISIONS_OF.items() for d in ds)
_TIMED = tuple((c,) for c in TIMED)

SERIES = (
    Series(
        "decisions",
        COUNTER,
        "decisions in the decision log, by command and decision",
        LOG,
        ("command", "decision"),
        label_sets=DECISION_PAIRS,
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
        "delegate_seconds",
        HISTOGRAM,
        "time the delegate took (its own process, spawn to exit) for the ADDs and DELs the "
        "guard forwarded, by command",
        LOG,
        ("command",),
        label_sets=_TIMED,
    ),
    Series(
        "delegate_errors",
        COUNTER,
        "forwarded ADDs and DELs whose delegate failed or timed out, by command (whether or not "
        "the guard then answered with success)",
        LOG,
        ("command",),
        label_sets=_TIMED,
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
        "oldest_attempted_timestamp_seconds",
        GAUGE,
        "when the oldest attempted marker (an ADD that never completed) was written, in "
        "seconds since the epoch; no sample when there is none",
        STATE,
        label_sets=(),
    ),
    Series(
        "ready",
        GAUGE,
        "the ready check (`cni-delguard ready`) as a state set: 1 for the reason that holds, 0 "
        "for the others (guarded, conf-not-wrapped, plugin-missing, plugin-not-running, "
        "uninstalled)",
        WATCH,
        ("reason",),
    ),
    Series(
        "node_guarded",
        GAUGE,
        "1 while the node is guarded: the answer of `cni-delguard ready`",
        WATCH,
    ),
    Series(
        "ready_since_timestamp_seconds",
        GAUGE,
        "since when the ready check has given its current answer (cni_delguard_ready), in "
        "seconds since the epoch: the refresh that first found it, or this watcher's first",
        WATCH,
    ),
    Series(
        "mode",
        GAUGE,
        "1 for the mode of the guard in the conf the runtime uses (enforce: it decides DELs; "
        "observe: it forwards every DEL and only logs what it would have decided); 0 for both "
        "while the conf does not name the guard",
        WATCH,
        ("mode",),
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
        "last_refresh_timestamp_seconds",
        GAUGE,
        "when the values served were last read from the node (seconds since the epoch); a "
        "refresh that fails leaves it, and every value, as they were",
        WATCH,
    ),
    Series(
        "refresh_interval_seconds",
        GAUGE,
        "how often the watcher reads the node for its metrics (--metrics-interval)",
        WATCH,
    ),
    Series(
        "refresh_errors",
        COUNTER,
        "refreshes that failed (the watcher's log says why; the last good values stay served)",
        WATCH,
    ),
    Series(
        "build",
        INFO,
        "the running cni-delguard's version and CPU arch",
        BUILD,
        ("version", "arch"),
        label_sets=(),
    ),
)


def label(name: str, value: object) -> str:
    """`value` when the label's vocabulary has it, else "other"."""
    return value if isinstance(value, str) and value in VOCABULARY[name] else OTHER

