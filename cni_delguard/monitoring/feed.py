"""What the watching installer serves: every series of monitoring/series.py, refreshed
incrementally.

- The decision log is read once, whole, at start, for the strict DELs that were already failing
  (a stuck attachment must not be forgotten when the watcher restarts); from then on only what
  was appended since the last refresh is read (node/follow.py's Tail: bounded per look, follows
  a rotation). A scrape never reads the log: it renders the last snapshot.
- Counters count what the guard decided while this watcher ran: they start at 0, as any
  exporter's do after a restart, rather than at the log's history, which Prometheus would take for
  a burst of increase (and page for deadlock breaks of last week).
- The markers are scanned (one small read per marker) and the ready check runs (node/ready.py,
  one exec of the plugin's VERSION) once per refresh, in the metrics thread.
- A refresh that fails leaves the last snapshot served, with its own time in
  `last_refresh_timestamp_seconds` and one more in `refresh_errors_total`: what is served is
  never passed off as current (an alert compares that time with `refresh_interval_seconds`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from cni_delguard.monitoring import metrics, series
from cni_delguard.monitoring.counts import DecisionCounts
from cni_delguard.node import actions, ready, watch
from cni_delguard.node.follow import Tail
from cni_delguard.ops import logread, stuck

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cni_delguard.monitoring.series import Values

# The guard keeps its log under 2 x 10 MiB (the file and `.1`); a larger history is not its own
# and is not read at start (a stuck DEL shows again at its next failure, within minutes).
HISTORY_MAX = 32 * 1024 * 1024
# Per refresh, at most this many looks of the Tail's 1 MiB: a backlog (a storm of decisions
# between two refreshes) is caught up over several refreshes rather than in one long one.
MAX_READS = 16


@dataclass(frozen=True)
class Plan:
    """What the watcher tells the metrics side."""

    opts: actions.Options  # the node as the installer sees it (for the ready check)
    log_file: str  # the guard's decision log, as seen from here ('' when there is none)
    counts: watch.Counts  # what the watch loop did
    stuck_after: float | None = None  # None: the doctor's threshold
    interval: float = 15.0  # seconds between refreshes (--metrics-interval)


class WatcherFeed:
    def __init__(self, plan: Plan, clock: Callable[[], float] = time.time) -> None:
        self.plan, self.clock = plan, clock
        self.threshold = stuck.DEFAULT_THRESHOLD if plan.stuck_after is None else plan.stuck_after
        self.counts = DecisionCounts()
        self.streaks = stuck.Streaks()
        self.tail: Tail | None = None
        self.records = logread.Records()  # what the Tail reads, with its malformed lines
        self.build = metrics.build_values()  # the bundle's build info: read once, it never changes
        self.errors = 0  # refreshes that failed
        self.values: Values = {}

    def refresh(self) -> None:
        try:
            values = self._read()
        except Exception:
            self.errors += 1
            # The last good values stay (each with the time it was read), with the count.
            self.values = {**self.values, **self._errors()}
            raise
        self.values = values  # one assignment: a scrape sees the old snapshot or the new one

    def _read(self) -> Values:
        if self.tail is None:
            self._start()
        assert self.tail is not None  # noqa: S101 - for mypy: _start sets it
        for _ in range(MAX_READS):
            for line in self.tail.read():
                rec = self.records.record(line)
                if rec is not None:
                    self.counts.add(rec)
                    self.streaks.add(rec)
            if not self.tail.behind:
                break
        readable = self.tail.readable or not self.plan.log_file
        malformed = self.records.malformed + self.tail.overlong
        log = metrics.log_values(readable, self.tail.errors, malformed)
        state_dir, now = self.plan.opts.state_dir, self.clock()
        values = metrics.assemble(
            self.counts, self.streaks, log, state_dir, now, self.threshold, self.build
        )
        values.update(self._watch_values())
        values["last_refresh_timestamp_seconds"] = {(): round(now, 3)}
        return values

    def _start(self) -> None:
        """The history first, for the streaks only; then a Tail from the end of the log."""
        log = self.plan.log_file
        if log and _size(log) + _size(log + ".1") <= HISTORY_MAX:
            try:
                for rec in logread.LogReader(log):
                    self.streaks.add(rec)
            except logread.LogError:
                pass  # no log yet, or unreadable: the Tail counts that
        self.tail = Tail(log)

    def _watch_values(self) -> Values:
        code, _, mode = ready.status(self.plan.counts.where or self.plan.opts)
        c = self.plan.counts
        reason = series.READY_REASONS.get(code, series.OTHER)
        modes: dict[tuple[str, ...], float | series.Histogram] = {
            (m,): float(m == mode) for m in series.MODES
        }
        if mode is not None and mode not in series.MODES:
            modes[(series.OTHER,)] = 1.0  # a conf the guard would refuse (its mode)
        return {
            "ready": {(r,): float(r == reason) for r in series.VOCABULARY["reason"]},
            "node_guarded": {(): float(code == 0)},
            "ready_code": {(): float(code)},
            "mode": modes,
            "rewraps": {(): float(c.rewraps)},
            "repairs": {(): float(c.repairs)},
            "backoffs": {(): float(c.backoffs)},
            "watch_errors": {(): float(c.errors)},
            "refresh_interval_seconds": {(): self.plan.interval},
            **self._errors(),
        }

    def _errors(self) -> Values:
        return {"refresh_errors": {(): float(self.errors)}}

    def render(self, accept: str) -> tuple[bytes, str]:
        from cni_delguard.monitoring import exposition

        return exposition.negotiate(self.values, accept)

    def write(self, path: str) -> None:
        metrics.write_values(path, self.values)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
