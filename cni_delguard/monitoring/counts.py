"""The decision log folded into the counters the metrics serve, one record at a time.

A handful of integers whatever the log holds (label values from series.VOCABULARY only), so the
watcher can fold records into it for as long as it runs: unlike `stats`' Tally, which keeps every
break and every unblocked attachment for its listing, nothing here grows with the log. Every
label set of the vocabularies is there from the start, at 0 (series.initial).
"""

from __future__ import annotations

import math
from collections import Counter

from cni_delguard.guard import decide, defaults
from cni_delguard.monitoring import series

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from cni_delguard.monitoring.series import Values

# A delegate call longer than this is not one the guard made (its longest default timeout is 240 s):
# a hand-edited log line, left out of the histogram rather than stretching it.
MAX_DELEGATE_MS = 24 * 3600 * 1000.0


class DecisionCounts:
    def __init__(self) -> None:
        self.decisions: Counter[tuple[str, ...]] = Counter()
        self.breaks = 0
        self.released = 0
        self.would_skip = 0
        self.would_free = 0
        self.delegate = {c: series.Histogram() for c in series.TIMED}
        self.delegate_errors = dict.fromkeys(series.TIMED, 0)

    def add(self, rec: Mapping[str, object]) -> None:
        command = series.label("command", rec.get("command"))
        decision = series.label("decision", rec.get("decision"))
        self.decisions[(command, decision)] += 1
        self._delegate(command, rec)
        if rec.get("command") != "DEL":
            return
        if decision == defaults.OBSERVE:
            self.would_skip += rec.get("wouldDecide") == decide.SKIP
            self.would_free += rec.get("wouldFree") is True
            return
        if decision in decide.BREAKS and isinstance(rec.get("delegateError"), dict):
            self.breaks += 1
        if decision == decide.RELEASED:
            self.released += 1

    def _delegate(self, command: str, rec: Mapping[str, object]) -> None:
        """A line that says how long the delegate ran (`delegateMs`) is a delegate call; it
        failed when the line carries the error the runtime got (`error`) or the one the guard
        answered with success instead (`delegateError`)."""
        ms = rec.get("delegateMs")
        if command not in self.delegate or not _duration(ms):
            return
        assert isinstance(ms, int | float)  # noqa: S101 - for mypy: _duration checked it
        self.delegate[command].observe(ms / 1000.0)
        if isinstance(rec.get("error"), dict) or isinstance(rec.get("delegateError"), dict):
            self.delegate_errors[command] += 1

    def values(self) -> Values:
        decisions: dict[tuple[str, ...], float | series.Histogram] = dict.fromkeys(
            series.DECISION_PAIRS, 0.0
        )
        decisions.update({k: float(n) for k, n in self.decisions.items()})
        return {
            "decisions": decisions,
            "deadlock_breaks": {(): float(self.breaks)},
            "released": {(): float(self.released)},
            "observe_would_skip": {(): float(self.would_skip)},
            "observe_would_free": {(): float(self.would_free)},
            "delegate_seconds": {(c,): h.copy() for c, h in self.delegate.items()},
            "delegate_errors": {(c,): float(n) for c, n in self.delegate_errors.items()},
        }


def _duration(ms: object) -> bool:
    """A number of milliseconds the guard could have logged (the log is a file anyone with
    root may edit: no bool, NaN, negative or absurd value reaches the histogram)."""
    if isinstance(ms, bool) or not isinstance(ms, int | float):
        return False
    return math.isfinite(ms) and 0 <= ms <= MAX_DELEGATE_MS
