"""The decision log folded into the counters the metrics serve, one record at a time.

A handful of integers whatever the log holds (label values from series.VOCABULARY only), so the
watcher can fold records into it for as long as it runs: unlike `stats`' Tally, which keeps every
break and every unblocked attachment for its listing, nothing here grows with the log.
"""

from __future__ import annotations

from collections import Counter

from cni_delguard.guard import decide, defaults
from cni_delguard.ops import series

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from cni_delguard.ops.series import Values

# A deadlock break: a DEL answered with success although the delegate failed it, for the
# metrics and for `cni-delguard stats` alike.
BREAKS = (decide.FORWARD_LENIENT, decide.RELEASED)


class DecisionCounts:
    def __init__(self) -> None:
        self.decisions: Counter[tuple[str, ...]] = Counter()
        self.breaks = 0
        self.released = 0
        self.would_skip = 0
        self.would_free = 0

    def add(self, rec: Mapping[str, object]) -> None:
        command = series.label("command", rec.get("command"))
        decision = series.label("decision", rec.get("decision"))
        self.decisions[(command, decision)] += 1
        if rec.get("command") != "DEL":
            return
        if decision == defaults.OBSERVE:
            self.would_skip += rec.get("wouldDecide") == decide.SKIP
            self.would_free += rec.get("wouldFree") is True
            return
        if decision in BREAKS and isinstance(rec.get("delegateError"), dict):
            self.breaks += 1
        if decision == decide.RELEASED:
            self.released += 1

    def values(self) -> Values:
        return {
            "decisions": {k: float(n) for k, n in self.decisions.items()},
            "deadlock_breaks": {(): float(self.breaks)},
            "released": {(): float(self.released)},
            "observe_would_skip": {(): float(self.would_skip)},
            "observe_would_free": {(): float(self.would_free)},
        }
