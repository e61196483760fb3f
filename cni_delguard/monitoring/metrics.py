"""The values of monitoring/series.py, read from the node, and the textfile they are written to.

`write(path, log_file, state_dir)` is `stats --prometheus FILE`: one look at the whole decision
log (counters restart when it rotates, which Prometheus treats as a counter reset) and at the
markers. The watching installer reads the log incrementally instead, and adds what only it
knows (monitoring/feed.py, which cni_delguard.cli connects to the watcher). Both render
through monitoring/exposition.py (prometheus-client), imported only inside the functions that
render: nothing of it is loaded by the plugin or by the operator commands that do not write
metrics.

The file is replaced atomically (temp file in the same dir, fsync, rename) with mode 0644, so a
collector that does not run as root can read it and never sees half a file.
"""

from __future__ import annotations

import os
import time

from cni_delguard import __version__
from cni_delguard.cni import errors
from cni_delguard.monitoring import series
from cni_delguard.monitoring.counts import DecisionCounts
from cni_delguard.ops import scan, stuck
from cni_delguard.ops.logread import LogError, LogReader
from cni_delguard.state import fsutil
from cni_delguard.state.marker import ATTEMPTED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cni_delguard.monitoring.series import Values

FILE_MODE = 0o644
# The arch is Kubernetes' name for it (the kubernetes.io/arch node label, buildinfo.ARCHES), so a
# dashboard can join build_info with the nodes; anything else is passed on when a plain word.
_WORD = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def write(path: str, log_file: str, state_dir: str) -> None:
    """`stats --prometheus`: render and replace `path` atomically (OSError when the dir is not
    writable)."""
    write_values(path, snapshot(log_file, state_dir))


def write_values(path: str, values: Values) -> None:
    """The mode is explicit: the umask must not decide whether a collector that is not root
    may read it."""
    from cni_delguard.monitoring import exposition

    fsutil.write_file(path, exposition.text(values), FILE_MODE)


def snapshot(log_file: str, state_dir: str, now: float | None = None) -> Values:
    """Every series that the log and the state dir give, from one read of the whole log."""
    now = time.time() if now is None else now
    counts, streaks = DecisionCounts(), stuck.Streaks()
    malformed, readable, read_errors = 0, False, 0
    try:
        reader = LogReader(log_file)
        for rec in reader:
            counts.add(rec)
            streaks.add(rec)
    except LogError:
        read_errors = int(_exists(log_file))
    else:
        malformed, readable = reader.malformed, True
    log = log_values(readable, read_errors, malformed)
    return assemble(counts, streaks, log, state_dir, now, stuck.DEFAULT_THRESHOLD, build_values())


def assemble(
    counts: DecisionCounts,
    streaks: stuck.Streaks,
    log: Values,
    state_dir: str,
    now: float,
    threshold: float,
    build: Values,
) -> Values:
    """Every series of the log and the state dir, from what was folded of the log (the whole
    of it for `stats --prometheus`, what was appended for the watcher) and the markers now."""
    values = counts.values()
    values.update(log)
    values["stuck_strict_dels"] = {(): float(len(streaks.stuck(now, threshold)))}
    values.update(marker_values(state_dir, now))
    values.update(build)
    return values


def _exists(log_file: str) -> bool:
    return any(os.path.lexists(p) for p in (log_file, log_file + ".1"))


def log_values(readable: bool, read_errors: int, malformed: int) -> Values:
    return {
        "log_readable": {(): float(readable)},
        "log_read_errors": {(): float(read_errors)},
        "log_malformed_lines": {(): float(malformed)},
    }


def marker_values(state_dir: str, now: float) -> Values:
    """The markers by state, when the oldest attempted one was written (and its age, the
    deprecated series), and whether the dir could be read (an unsafe or unreadable state dir is
    reported, never fatal; a missing one has no marker)."""
    try:
        found, readable = scan.markers(state_dir), 1.0
    except FileNotFoundError:
        found, readable = [], 1.0
    except (OSError, errors.CniError):
        found, readable = [], 0.0
    by_state = dict.fromkeys(series.STATES, 0.0)
    oldest: float | None = None
    for m in found:
        key = series.label("state", m.state)
        by_state[key] = by_state.get(key, 0.0) + 1
        if m.state == ATTEMPTED and m.time is not None:
            oldest = m.time if oldest is None else min(oldest, m.time)
    age = 0.0 if oldest is None else max(0.0, now - oldest)
    return {
        "state_readable": {(): readable},
        "markers": {(s,): n for s, n in by_state.items()},
        # No sample when there is none: 0 would read as 1970, and an age of 0 as "just now".
        "oldest_attempted_timestamp_seconds": {} if oldest is None else {(): oldest},
        "oldest_attempted_age_seconds": {(): round(age, 1)},
    }


def build_values() -> Values:
    """The arch the bundle was built for (its build info), or this machine's from source."""
    from cni_delguard import buildinfo

    arch = str(buildinfo.info().get("arch"))
    return {"build": {(__version__, arch if set(arch) <= _WORD else series.OTHER): 1.0}}
