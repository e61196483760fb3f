"""`cni-delguard live`: the liveness probe of `install --watch --live-file PATH`.

A readiness probe never restarts a pod; some states only a restart fixes. A distribution's
upgrade can move the runtime's bin dir where this pod cannot write (a hostPath the kubelet
resolved through a link when the pod started, a dir outside its mounts): the watcher then takes
the guard out of the conf (never a conf naming a missing plugin) and the node stays unguarded
until the pod is started again with the node's current mounts. And a watch loop that hangs
guards nothing.

So the watcher writes a heartbeat file (`--live-file`, in the container's own emptyDir, never on
the host) on every poll, at most once a second: the time, and since when it has failed to put the
plugin where the runtime looks (and why). `live` exits 0 while the heartbeat is fresh and no such
failure has lasted `--grace` seconds; else one line and its code:

| code | meaning |
| --- | --- |
| 0 | live |
| 14 | no heartbeat for `--stale` seconds (the watch loop hangs, or never started) |
| 15 | the plugin could not be put where the runtime looks for `--grace` seconds |
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable

STALE, GRACE = 60.0, 120.0


class Heartbeat:
    """The watcher's side: beat(problem) on every poll ('' when the node is fixed)."""

    def __init__(self, path: str, clock: Callable[[], float] = time.time,
                 every: float = 1.0) -> None:
        self.path, self.clock, self.every = path, clock, every
        self.since: float | None = None
        self.said = ("", "")
        self.written = -math.inf

    def beat(self, problem: str, metrics: str = "") -> None:
        """`problem`: why the plugin cannot be put in place; `metrics`: why the metrics cannot
        be served (for `ready --live-file`); '' for none."""
        now = self.clock()
        if problem and self.since is None:
            self.since = now
        elif not problem:
            self.since = None
        said = (problem, metrics)
        if said == self.said and now - self.written < self.every:
            return
        self.said = said
        body = {"time": now, "unfixedSince": self.since, "problem": problem, "metrics": metrics}
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(body, f)
        os.replace(tmp, self.path)
        self.written = now


def metrics_problem(path: str, now: float, stale: float = STALE) -> str:
    """What a fresh heartbeat says keeps the metrics from being served ('' for nothing, or for
    no fresh heartbeat: that is the liveness probe's to judge)."""
    try:
        with open(path, encoding="utf-8") as f:
            body = json.load(f)
        beat, said = float(body["time"]), body.get("metrics", "")
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    fresh = math.isfinite(beat) and now - beat <= stale
    return said if fresh and isinstance(said, str) else ""


def check(path: str, now: float, stale: float = STALE, grace: float = GRACE) -> tuple[int, str]:
    """The probe's verdict on the heartbeat file at `path`."""
    try:
        with open(path, encoding="utf-8") as f:
            body = json.load(f)
        beat = float(body["time"])
        since = body.get("unfixedSince")
        problem = str(body.get("problem", ""))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return 14, f"not live: no heartbeat in {path} ({exc.__class__.__name__})"
    if not math.isfinite(beat) or now - beat > stale:
        return 14, f"not live: the watcher's last heartbeat was {now - beat:.0f} s ago"
    if isinstance(since, (int, float)) and math.isfinite(since) and now - since > grace:
        return 15, (f"not live: {problem} for {now - since:.0f} s; a restart gives the pod "
                    "the node's current dirs")
    return 0, "live" + (f" (failing for {now - since:.0f} s: {problem})"
                        if isinstance(since, (int, float)) else "")
