"""`install --watch`: keep the node guarded for as long as the installer runs.

Polling, not inotify: every `interval` (1 s) the watcher stats the conf the runtime uses (name,
inode, mtime, ctime, size) and the guard's bundle (its link and the directories of the version it
points to; the full check of every file's kind and size when those changed, and once a minute).
That needs no inotify watch (a per-user limit on nodes full of watchers), sees a conf dir that is
itself replaced, and costs about 0.2 % of a core (docs/install.md). A conf that changed is
re-wrapped once it has stayed unchanged for `settle` (0.5 s; multus writes its conf in one rename,
other installers in several steps), so a multus rewrite is wrapped again within about
interval + settle (1.5 s) plus the check of the plugin (one exec of VERSION).

Each poll, in this order:
0. the runtime's dirs are resolved again (`resolve`: the layout's bin dir and conf dir, links
   followed inside the node's root): a distribution's upgrade moves them under a running watcher
   (a new k3s release dir behind data/current, k3s's data/cni appearing, a MicroK8s refresh
   moving `current` to a new revision). When they moved, the bundle is installed into the new bin
   dir first, before anything is wrapped (when that fails, the guard is taken out of the conf:
   the runtime would not find it), then the conf of the new conf dir is checked and wrapped; the
   old dirs are left as they are (gone, or the distribution's to remove);
1. an uninstall record (record.py) stops everything but the periodic tasks: uninstall wins;
2. a broken bundle (link missing, files missing or changed) is repaired from the bundle dir, or,
   with no bundle to install, the guard is taken out of the conf: never a conf naming a missing
   plugin;
3. a plugin that no longer runs on the node (RunsProbe: the check install makes before a wrap,
   run once a minute, every 10 s while it fails, and at once when the bundle or the node's
   /etc/ld.so.preload changed) is unwrapped from every conf, the node's own conf kept; wrapped
   again once it runs;
4. a changed conf is re-wrapped (actions.install, which checks the plugin again under the lock).

A writer that puts its own version back every time would make that a loop (a rewrite storm), so
re-wraps and repairs are capped per window (10 a minute): past the cap the watcher logs it and
backs off, doubling up to 60 s, then tries again: the storm is damped to one write a minute, and
the node is never given up for good (the readiness probe shows it unguarded meanwhile).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import select
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from cni_delguard.host.root import NodeRoot
from cni_delguard.node import actions, bundle, confdir, record
from cni_delguard.node import runs as plugin
from cni_delguard.node.errors import InstallerError
from cni_delguard.tooling import UsageError

Signature = tuple[object, ...]


class Stop(Protocol):
    """What the loop waits on: a threading.Event (tests), or a SignalStop (the command)."""

    def is_set(self) -> bool: ...
    def wait(self, timeout: float | None = None) -> bool: ...


class SignalStop:
    """A stop flag that a signal handler may set. threading.Event is not safe there: its set()
    takes the Event's lock, which the main thread itself holds for a moment inside Event.wait,
    and a handler runs on the main thread between any two bytecodes: a SIGTERM landing in that
    moment would deadlock the watcher (the pod would then ignore SIGTERM until the kubelet's
    SIGKILL, and --uninstall-on-stop would never run). set() here is a flag and one byte into a
    pipe, no lock; wait() is a select on the pipe."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._set = False

    def set(self) -> None:
        self._set = True
        try:
            os.write(self._write, b"x")
        except BlockingIOError:  # the pipe is full of earlier wake-ups: it is readable already
            pass

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        if not self._set:
            select.select([self._read], [], [], timeout)
        return self._set


@dataclass(frozen=True)
class Limits:
    interval: float = 1.0  # seconds between polls
    settle: float = 0.5  # a change must stay unchanged this long before it is patched
    # A crash-looping multus rewrites its conf at the kubelet's back-off (10 s, 20 s, ... 5 min):
    # a few times a minute at most. Only a writer undoing the wrap in a loop goes past this.
    max_repatches: int = 10  # re-patches allowed per window ...
    window: float = 60.0  # ... of this many seconds
    max_backoff: float = 60.0  # never give up for longer: the node must not stay unguarded


@dataclass
class Counts:
    """What the watcher did, for its metrics (monitoring/feed.py reads them from another thread:
    each is an int that only this loop writes)."""

    rewraps: int = 0  # the conf wrapped (at start, and after another writer changed it)
    repairs: int = 0  # a damaged or missing bundle copied in again
    backoffs: int = 0  # waits imposed on a writer that keeps undoing the wrap
    errors: int = 0  # a re-wrap or repair that failed (tried again on the next change)
    moves: int = 0  # the runtime's bin dir or conf dir moved (a distribution's upgrade)
    # The node's dirs as last resolved (None: as the watcher started); the metrics' ready check
    # reads it, so it follows a move.
    where: actions.Options | None = None
    # Why the plugin cannot be put where the runtime looks ('' while it can): the liveness
    # heartbeat (live.py) reports it, and a restart follows when it lasts.
    unfixed: str = ""
    # Why the metrics cannot be served where they were asked for ('' while they can): their
    # port held by another process. The metrics thread writes it; the heartbeat carries it to
    # `ready --live-file`.
    metrics: str = ""


@dataclass
class Periodic:
    """A task run every `every` seconds from the watch loop (log follower, metrics file)."""

    every: float
    fn: Callable[[], None]
    due: float = 0.0


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


class BundleProbe:
    """bundle.check, but only when bundle.signature changed or every `full_every` seconds. With
    `expected` (the image's manifest) every check compares against it, and the one every
    `full_every` seconds reads every file's sha256 (about 0.1 s a minute): a version dir changed
    together with its manifest, or a byte changed in place, is found and repaired."""

    def __init__(self, bin_dir: str, clock: Callable[[], float], full_every: float = 60.0,
                 expected: bundle.Entries | None = None) -> None:
        self.bin_dir, self.clock, self.full_every = bin_dir, clock, full_every
        self.expected = expected
        self.seen: tuple[object, ...] | None = None
        # The first deep check a full period after the start: the install just before the
        # loop verified every file (a deep check at once doubled the start's hashing).
        self.checked = clock()

    def problem(self) -> str | None:
        sig, now = bundle.signature(self.bin_dir), self.clock()
        due = now - self.checked >= self.full_every
        if sig == self.seen and not due:
            return None
        deep = due and self.expected is not None
        problem = bundle.check(self.bin_dir, deep=deep, expected=self.expected)
        self.seen, self.checked = (None, 0.0) if problem else (sig, now)
        return problem


class RunsProbe:
    """runs.runs (the plugin answers VERSION with the node's root as /, in the runtime's
    environment) once every `every` seconds, every `failing_every` while it fails, and at once
    when the bundle or the node's /etc/ld.so.preload changed: an exec of the plugin, about 30 ms,
    so not every poll. None, or why it does not run."""

    def __init__(self, opts: actions.Options, clock: Callable[[], float], every: float = 60.0,
                 failing_every: float = 10.0) -> None:
        self.opts, self.clock = opts, clock
        self.every, self.failing_every = every, failing_every
        self.seen: tuple[object, ...] | None = None
        self.checked, self.last, self.fresh = 0.0, "", False

    def problem(self) -> str | None:
        sig, now = self._signature(), self.clock()
        wait = self.failing_every if self.last else self.every
        self.fresh = sig != self.seen or now - self.checked >= wait
        if self.fresh:
            self.seen, self.checked = sig, now
            self.last = plugin.runs(self.opts.bin_dir, self.opts.root) or ""
        return self.last or None

    def _signature(self) -> tuple[object, ...]:
        try:
            st = os.stat(NodeRoot(self.opts.root).here("/etc/ld.so.preload"))
            preload: tuple[object, ...] = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            preload = ()
        return (bundle.signature(self.opts.bin_dir), preload)


def cannot_run(runs: RunsProbe, opts: actions.Options, say: actions.Say, counts: Counts,
               once: Once) -> bool:
    """True while the plugin does not run on the node: the guard is then unwrapped (once; a
    failure is logged and tried again) and no conf is wrapped."""
    problem = runs.problem()
    if problem is None:
        return False
    once(f"watch: {problem}; the guard is out of the conf until it runs")
    if runs.fresh:  # checked just now: not an unwrap (and its exec) every poll
        _guarded(lambda: actions.unwrap_unrunnable(opts, say), say, counts)
    return True


class Once:
    """Say a repeating condition once, until it changes (a poll a second must not flood logs);
    "" says that it cleared, which is not a line of its own."""

    def __init__(self, say: actions.Say) -> None:
        self.say, self.last = say, ""

    def __call__(self, message: str) -> None:
        if message and message != self.last:
            self.say(message)
        self.last = message


class _Dirs:
    """The node's dirs the loop works on and the probes of its bin dir, replaced together when
    the runtime's dirs move."""

    def __init__(self, opts: actions.Options, clock: Callable[[], float],
                 expected: bundle.Entries | None) -> None:
        self.opts, self.clock, self.expected = opts, clock, expected
        self.conf_opts = dataclasses.replace(opts, bundle_dir=None)  # re-wraps: no bundle copy
        self.probe = BundleProbe(opts.bin_dir, clock, expected=expected)
        self.runs = RunsProbe(opts, clock)
        self.retry_at = 0.0  # after a failed repair: not before (each try reads the bundle)

    def repair(self, say: actions.Say) -> bool:
        return actions.repair(self.opts, say, self.expected)


def run(
    opts: actions.Options,
    limits: Limits,
    stop: Stop,
    say: actions.Say,
    clock: Callable[[], float] = time.monotonic,
    tasks: Sequence[Periodic] = (),
    counts: Counts | None = None,
    resolve: Resolve | None = None,
) -> actions.Options:
    """Watch until `stop` is set. `opts.bundle_dir` is what a broken bundle is repaired from;
    `resolve` gives the runtime's dirs again on each poll (None: they never move). Returns the
    node's dirs as last resolved (what an uninstall on stop works on)."""
    # The image's manifest, read once: what the installed version is compared with.
    expected = bundle.image_entries(opts.bundle_dir) if opts.bundle_dir is not None else None
    budget, once, dirs = Budget(limits, clock), Once(say), _Dirs(opts, clock, expected)
    counts = Counts() if counts is None else counts
    seen: Signature | None = None
    while not stop.is_set():
        _run_due(tasks, clock(), say)
        moved = _follow(dirs, resolve, clock, say, once, counts)
        dirs, seen = moved or dirs, None if moved else seen
        if stamp := record.uninstalled(dirs.opts.state_dir):
            once(f"watch: uninstalled at {stamp}; not wrapping until a new install")
            seen = None
        elif problem := dirs.probe.problem():
            if _may(budget, limits, stop, say, counts):
                if _repair(dirs, say, counts):
                    budget.spend()
                    counts.repairs += 1
                elif dirs.opts.bundle_dir is None:
                    once(f"watch: {problem}; not wrapping until the bundle is installed")
            seen = None
        elif cannot_run(dirs.runs, dirs.opts, say, counts, once):
            seen = None
        else:
            counts.unfixed = ""
            sig = signature(dirs.opts)
            if sig != seen and _settled(dirs.opts, sig, limits, stop):
                if not _may(budget, limits, stop, say, counts):
                    continue
                once("")
                if apply_once(dirs.conf_opts, say, counts):
                    budget.spend()
                    counts.rewraps += 1
                else:
                    budget.relax()
                # The state checked, not the state after our write: a writer that undoes the
                # patch a moment later must still look like a change. Our write costs one check.
                seen = sig
        stop.wait(limits.interval)
    return dirs.opts


def _follow(
    old: _Dirs,
    resolve: Resolve | None,
    clock: Callable[[], float],
    say: actions.Say,
    once: Once,
    counts: Counts,
) -> _Dirs | None:
    """None, or when the runtime's dirs moved, the new ones, with the bundle installed into the
    new bin dir at once, before the loop looks at any conf (not counted against the re-wrap
    budget: a move is not a writer fighting us). When it cannot go there, repair takes the
    guard out of the conf."""
    opts = None if resolve is None else _moved(old.opts, resolve, say, once)
    if opts is None:
        return None
    dirs = _Dirs(opts, clock, old.expected)
    counts.moves += 1
    counts.where = opts
    if not record.uninstalled(opts.state_dir):
        _repair(dirs, say, counts)
    return dirs


REPAIR_RETRY = 10.0  # seconds between tries while the bin dir cannot take the bundle


def _repair(dirs: _Dirs, say: actions.Say, counts: Counts) -> bool:
    """actions.repair, logged; a failure (the bin dir cannot take the bundle) is what the
    liveness heartbeat reports until a repair succeeds or the plugin is found whole. While it
    keeps failing it is tried every REPAIR_RETRY seconds, and said once, not every poll."""
    failing = bool(counts.unfixed)
    if failing and dirs.clock() < dirs.retry_at:
        return False
    quiet: actions.Say = (lambda _line: None) if failing else say
    errors = counts.errors
    done = _guarded(functools.partial(dirs.repair, quiet), quiet, counts)
    failed = counts.errors > errors
    counts.unfixed = f"the plugin cannot be installed into {dirs.opts.bin_dir}" if failed else ""
    dirs.retry_at = dirs.clock() + REPAIR_RETRY if failed else 0.0
    return done


Resolve = Callable[[actions.Options], actions.Options]


def _moved(
    opts: actions.Options, resolve: Resolve, say: actions.Say, once: Once
) -> actions.Options | None:
    """The node's dirs resolved again: the new options when the bin dir or the conf dir moved,
    else None (also when they cannot be resolved now: said once, tried again next poll)."""
    try:
        new = resolve(opts)
    except (InstallerError, OSError, UsageError) as exc:
        once(f"watch: cannot resolve the runtime's dirs: {exc}; keeping {opts.bin_dir}")
        return None
    if (new.bin_dir, new.conf_dir) == (opts.bin_dir, opts.conf_dir):
        return None
    for what, old, now in (("bin", opts.bin_dir, new.bin_dir), ("conf", opts.conf_dir,
                                                                 new.conf_dir)):
        if old != now:
            say(f"watch: the runtime's {what} dir moved: {old} -> {now}")
    return new


def _may(budget: Budget, limits: Limits, stop: Stop, say: actions.Say, counts: Counts) -> bool:
    wait = budget.wait_needed()
    if wait:
        counts.backoffs += 1
        say(
            f"watch: the conf or the bundle was changed {len(budget.history)} times in "
            f"{limits.window:.0f} s by another writer; backing off {wait:.0f} s"
        )
        stop.wait(wait)
    return not wait


def _run_due(tasks: Sequence[Periodic], now: float, say: actions.Say) -> None:
    for task in tasks:
        if now >= task.due:
            task.due = now + task.every
            try:
                task.fn()
            except Exception as exc:  # noqa: BLE001 - a side task must never stop the guarding
                say(f"watch: {exc!r} in a periodic task")


def _settled(opts: actions.Options, sig: Signature, limits: Limits, stop: Stop) -> bool:
    stop.wait(limits.settle)
    return signature(opts) == sig and not stop.is_set()


def _guarded(fn: Callable[[], bool], say: actions.Say, counts: Counts) -> bool:
    """Run one step; errors are logged, not raised: the watcher tries again on the next change."""
    try:
        return fn()
    except (InstallerError, OSError) as exc:
        counts.errors += 1
        say(f"watch: {exc}; trying again on the next change")
        return False


def apply_once(opts: actions.Options, say: actions.Say, counts: Counts) -> bool:
    """Wrap the conf if it needs it (honouring an uninstall); True if it was rewritten."""
    return _guarded(lambda: actions.install(opts, io.StringIO(), say, watcher=True), say, counts)
