"""Metrics for node-exporter's textfile collector, from the decision log and the markers.

`write(path, log_file, state_dir)` is the one entry point (`stats --prometheus FILE`, and the
installer's periodic refresh). The file is replaced atomically (temp file in the same dir,
fsync, rename) with mode 0644, so a collector that does not run as root can read it and never
sees half a file. Counters come from the log and restart when it rotates, which Prometheus
treats as a counter reset.
"""

from __future__ import annotations

import time

from cni_delguard.cni import errors
from cni_delguard.ops import scan, stats
from cni_delguard.ops.logread import LogError
from cni_delguard.state import fsutil
from cni_delguard.state.marker import ATTEMPTED, COMPLETED, CORRUPT, DELETING

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from cni_delguard.ops.stats import Tally

PREFIX = "cni_delguard"
COMMANDS = ("ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION")
STATES = (ATTEMPTED, COMPLETED, DELETING, CORRUPT)
FILE_MODE = 0o644
_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


def write(path: str, log_file: str, state_dir: str) -> None:
    """Render and replace `path` atomically (OSError when the dir is not writable). The mode is
    explicit: the umask must not decide whether a collector that is not root may read it."""
    fsutil.write_file(path, render(log_file, state_dir).encode(), FILE_MODE)


def render(log_file: str, state_dir: str, now: float | None = None) -> str:
    now = time.time() if now is None else now
    out: list[str] = []
    try:
        tally, malformed = stats.read(log_file)
    except LogError:
        tally, malformed, log_ok = stats.Tally(), 0, 0
    else:
        log_ok = 1
    _gauge(out, "log_readable", "1 when the decision log could be read", [("", log_ok)])
    _log_metrics(out, tally, malformed)
    _marker_metrics(out, state_dir, now)
    return "\n".join(out) + "\n"


def _log_metrics(out: list[str], tally: Tally, malformed: int) -> None:
    decisions = [
        (f'{{command="{_safe(c, COMMANDS)}",decision="{_safe(d)}"}}', n)
        for (c, d), n in sorted(tally.counts.items())
    ]
    _counter(out, "decisions_total", "decisions in the log, by command and decision", decisions)
    _counter(
        out,
        "deadlock_breaks_total",
        "DELs answered with success although the delegate failed",
        [("", len(tally.breaks))],
    )
    _counter(
        out,
        "observe_would_skip_total",
        "observe mode: DELs the guard would have skipped",
        [("", tally.would_skip)],
    )
    _counter(
        out,
        "observe_would_free_total",
        "observe mode: failed DELs the guard would have answered with success",
        [("", tally.would_free)],
    )
    _counter(
        out, "log_malformed_lines_total", "log lines that are not a JSON object", [("", malformed)]
    )


def _marker_metrics(out: list[str], state_dir: str, now: float) -> None:
    try:
        found = scan.markers(state_dir)
        readable = 1
    except FileNotFoundError:
        found, readable = [], 1  # no state dir yet: no marker
    except (OSError, errors.CniError):  # unsafe or unreadable: reported, never fatal
        found, readable = [], 0
    _gauge(out, "state_readable", "1 when the state dir could be read", [("", readable)])
    by_state = dict.fromkeys(STATES, 0)
    oldest = 0.0
    for m in found:
        by_state[m.state] = by_state.get(m.state, 0) + 1
        age = m.age(now)
        if m.state == ATTEMPTED and age is not None:
            oldest = max(oldest, age)
    _gauge(
        out,
        "markers",
        "the guard's markers on this node, by state",
        [(f'{{state="{_safe(s)}"}}', n) for s, n in by_state.items()],
    )
    _gauge(
        out,
        "oldest_attempted_age_seconds",
        "age of the oldest attempted marker (an ADD that never completed); 0 when none",
        [("", round(oldest, 1))],
    )


def _safe(value: str, allowed: tuple[str, ...] | None = None) -> str:
    """A label value that is short and plain: anything else from the log becomes "other", so
    a hostile log can neither break the format nor explode the label set."""
    if allowed is not None:
        return value if value in allowed else "other"
    ok = 0 < len(value) <= 40 and all(c in _LABEL_CHARS for c in value)
    return value if ok else "other"


def _counter(out: list[str], name: str, doc: str, samples: Sequence[tuple[str, float]]) -> None:
    _family(out, name, "counter", doc, samples)


def _gauge(out: list[str], name: str, doc: str, samples: Sequence[tuple[str, float]]) -> None:
    _family(out, name, "gauge", doc, samples)


def _family(
    out: list[str], name: str, kind: str, doc: str, samples: Sequence[tuple[str, float]]
) -> None:
    full = f"{PREFIX}_{name}"
    out.append(f"# HELP {full} {doc}")
    out.append(f"# TYPE {full} {kind}")
    merged: dict[str, float] = {}
    for labels, value in samples:  # two raw values may map to one safe label: add them up
        merged[labels] = merged.get(labels, 0) + value
    out += [f"{full}{labels} {_number(value)}" for labels, value in merged.items()]


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))
