"""`install --watch`: keep the conf wrapped when something rewrites it.

multus regenerates 00-multus.conf when its master network changes; other installers rewrite their
conflists on start. The watcher polls the conf's identity (name, inode, mtime, size; no extra
dependency, no inotify limits), waits for a change to settle, and re-applies the patch. A writer
that puts its own version back every time would make that a loop, so re-patches are capped per
window: past the cap the watcher logs it, backs off (doubling up to a limit) and lets the other
writer win until the window frees up.
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from cni_delguard.node import actions, confdir
from cni_delguard.node.errors import InstallerError

Signature = tuple[object, ...]


@dataclass(frozen=True)
class Limits:
    interval: float = 2.0  # seconds between polls
    settle: float = 1.0  # a change must stay unchanged this long before it is patched
    max_repatches: int = 5  # re-patches allowed per window ...
    window: float = 600.0  # ... of this many seconds
    max_backoff: float = 1800.0


def signature(opts: actions.Options) -> Signature:
    try:
        path = confdir.pick(opts.conf_dir, opts.conf_file)
        st = os.lstat(path)
    except (InstallerError, OSError):
        return ("missing",)
    return (path, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


class Budget:
    """Re-patches allowed per window; past the cap, a wait that doubles each time it is hit."""

    def __init__(self, limits: Limits, clock: Callable[[], float]) -> None:
        self.limits, self.clock = limits, clock
        self.history: deque[float] = deque()
        self.backoff = limits.interval

    def wait_needed(self) -> float:
        """0 if a re-patch may happen now, else how long to back off."""
        now = self.clock()
        while self.history and now - self.history[0] > self.limits.window:
            self.history.popleft()
        if len(self.history) < self.limits.max_repatches:
            return 0.0
        wait = max(self.backoff, self.limits.window - (now - self.history[0]))
        self.backoff = min(self.backoff * 2, self.limits.max_backoff)
        return wait

    def spend(self) -> None:
        self.history.append(self.clock())

    def relax(self) -> None:
        self.backoff = self.limits.interval


def run(
    opts: actions.Options,
    limits: Limits,
    stop: threading.Event,
    say: actions.Say,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Watch until `stop` is set. `opts` should carry no bundle dir: only the conf is re-applied."""
    budget = Budget(limits, clock)
    seen: Signature | None = None
    while not stop.is_set():
        sig = signature(opts)
        if sig != seen and _settled(opts, sig, limits, stop):
            wait = budget.wait_needed()
            if wait:
                say(
                    f"watch: the conf was rewritten {len(budget.history)} times in "
                    f"{limits.window:.0f} s by another writer; backing off {wait:.0f} s"
                )
                stop.wait(wait)
                continue
            if apply_once(opts, say):
                budget.spend()
            else:
                budget.relax()
            # The state checked, not the state after our write: a writer that undoes the patch
            # a moment later must still look like a change. Our own write costs one more check.
            seen = sig
        stop.wait(limits.interval)


def _settled(opts: actions.Options, sig: Signature, limits: Limits, stop: threading.Event) -> bool:
    stop.wait(limits.settle)
    return signature(opts) == sig and not stop.is_set()


def apply_once(opts: actions.Options, say: actions.Say) -> bool:
    """Patch the conf if it needs it; True if it was rewritten. Errors are logged, not raised."""
    try:
        return actions.install(opts, io.StringIO(), say)
    except (InstallerError, OSError) as exc:
        say(f"watch: {exc}; trying again on the next change")
        return False
