"""Command line of `cni-delguard install`, `uninstall` and `ready`.

`register(sub)` adds them to cni_delguard.cli's subcommands; `main(argv)` runs them on their own
(the tests' way in). One-shot messages go to stderr and `--dry-run` prints the diff on stdout; the
long-running `install --watch` logs every line, with a UTC time, to stdout (what `kubectl logs`
shows). This is the one place where errors become a single line on stderr and an exit code (the
table is in errors.py; `ready` has its own, in ready.py).

The metrics seam: `register(sub, metrics=hook)` gives `install` the watcher's metrics options
(`--metrics-address`, `--metrics-file`, ...) and lets `install --watch` start what serves and
writes them, in a thread of its own (cni_delguard/monitoring/exporter.py, the `Metrics` below).
node/ (floor 3) cannot import the monitoring package (floor 5), so the caller above both
connects them; without a hook the options are not there.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO, TypeVar

from cni_delguard.guard import defaults
from cni_delguard.node import (
    actions,
    confdir,
    follow,
    hostlock,
    kubeletconf,
    layouts,
    live,
    multusdaemon,
    ready,
    record,
    watch,
)
from cni_delguard.node import options as where
from cni_delguard.node.errors import InstallerError, NoConfError
from cni_delguard.tooling import Parser, UsageError

_T = TypeVar("_T")

PROG = "cni-delguard"
# Guard keys that are paths: normalized before they are written into the conf.
_PATH_KEYS = ("stateDir", "logFile")


class Stoppable(Protocol):
    def stop(self) -> None: ...


class Metrics(Protocol):
    """The watcher's metrics side (cni_delguard/monitoring/exporter.py): its options, their
    check before the watcher starts (UsageError), and the thread that serves and writes them
    (None when no option asks for it)."""

    def add_options(self, group: Any) -> None: ...
    def check(self, args: argparse.Namespace) -> None: ...
    def start(
        self,
        args: argparse.Namespace,
        opts: actions.Options,
        log_file: str,
        counts: watch.Counts,
        say: actions.Say,
    ) -> Stoppable | None: ...


def build_parser(out: TextIO | None = None, err: TextIO | None = None) -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG, description="Put cni-delguard on a node, or take it off.", out=out, err=err
    )
    register(parser.add_subparsers(dest="command", required=True))
    return parser


Assess = Callable[[str, str], str]  # (root, layout) -> a line saying what the guard fixes


def register(sub: Any, metrics: Metrics | None = None, assess: Assess | None = None) -> None:
    """Add `install`, `uninstall` and `ready` to a parser's subcommands. `assess`: what
    `install --watch` logs at start (ops/assess, connected by the caller above both)."""
    inst = sub.add_parser(
        "install",
        help="copy the bundle into the bin dir and wrap the conf (--watch: and keep it wrapped)",
        description="Copy the bundle into the CNI bin dir and wrap the conf the runtime uses.",
    )
    uninst = sub.add_parser(
        "uninstall",
        help="restore the conf and remove the bundle; no installer wraps again until an install",
        description="Put the original conf back byte for byte, then remove the bundle.",
    )
    alive = sub.add_parser(
        "live",
        help="liveness probe: exit 0 while `install --watch --live-file` keeps the node fixable",
        description="Exit 0 while the watcher's heartbeat is fresh and it has not failed to put "
        "the plugin where the runtime looks for --grace seconds (node/live.py).",
    )
    alive.set_defaults(run=run, metrics=metrics)
    alive.add_argument("--live-file", required=True, metavar="PATH",
                       help="the heartbeat the watcher writes (its --live-file)")
    alive.add_argument("--stale", type=float, default=live.STALE, metavar="SECONDS",
                       help="a heartbeat older than this fails (%(default)g)")
    alive.add_argument("--grace", type=float, default=live.GRACE, metavar="SECONDS",
                       help="a failure to install the plugin lasting this long fails "
                       "(%(default)g)")
    probe = sub.add_parser(
        "ready",
        help="readiness probe: exit 0 only while the node is guarded",
        description="Exit 0 only while the conf the runtime uses names the guard and it runs.",
    )
    for p in (inst, uninst, probe):
        _add_where(p)
        p.set_defaults(run=run, metrics=metrics, assess=assess)
    for p in (inst, uninst):  # a probe changes nothing, waits for no lock and wraps nothing
        _add_change(p)
    _add_install(inst, metrics)
    uninst.add_argument(
        "--hold", action="store_true", help="after uninstalling, stay running until SIGTERM"
    )
    probe.add_argument(
        "--uninstalled", action="store_true", help="ready when the guard is off the node instead"
    )
    probe.add_argument(
        "--live-file",
        metavar="PATH",
        help="the watcher's heartbeat (its --live-file): also not ready while it says its "
        "metrics port is held by another process (exit 16)",
    )


def _add_where(p: argparse.ArgumentParser) -> None:
    """Where the node keeps what the command looks at (every one of the three)."""
    layouts.add_option(p)
    where.add(p, "bin_dir", "conf_dir")
    p.add_argument(
        "--conf-file",
        metavar="NAME",
        help="conf file in the conf dir (default: the "
        "one the runtime uses, the first .conf/.conflist/.json by name)",
    )
    kept = "the installer keeps originals, its lock and the uninstall record in DIR/installer"
    where.add(
        p,
        "state_dir",
        "root",
        state_dir={"help": f"the guard's stateDir; {kept} (the layout's: {defaults.STATE_DIR})"},
    )


def _add_change(p: argparse.ArgumentParser) -> None:
    """How a command that changes the node does it (install, uninstall)."""
    p.add_argument(
        "--wrap",
        metavar="TYPE",
        help="plugin type to wrap (default: detect multus thin or thick in the conf)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the diff, change nothing")
    p.add_argument(
        "--lock-timeout",
        type=float,
        default=hostlock.DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help="wait this long for another installer on the node (%(default)g)",
    )


def _add_install(p: argparse.ArgumentParser, metrics: Metrics | None) -> None:
    p.add_argument(
        "--bundle-dir",
        metavar="DIR",
        help="one-folder bundle to install (default: the folder of this frozen executable)",
    )
    p.add_argument(
        "--no-bundle",
        action="store_true",
        help="only patch the conf (refused unless a working cni-delguard is in the bin dir)",
    )
    p.add_argument("--log-file", metavar="PATH", help="the guard's logFile ('' disables)")
    p.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help="the guard's logLevel: debug, info, warning or error (default: leave the conf's "
        "as it is; a new guard logs at info)",
    )
    p.add_argument(
        "--mode",
        choices=("enforce", "observe"),
        help="the guard's mode: observe forwards every DEL and only logs what it would have "
        "decided (default: leave the conf's mode as it is; a new guard enforces)",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to this long for the runtime's conf to appear (boot) (%(default)g)",
    )
    w = p.add_argument_group("long-running mode")
    w.add_argument("--watch", action="store_true", help="stay running and keep the node guarded")
    w.add_argument(
        "--watch-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="look at the conf and the bin dir this often (%(default)g)",
    )
    w.add_argument(
        "--max-repatches",
        type=int,
        default=watch.Limits.max_repatches,
        metavar="N",
        help="re-wraps and repairs allowed per --repatch-window before backing off (%(default)s)",
    )
    w.add_argument(
        "--repatch-window",
        type=float,
        default=watch.Limits.window,
        metavar="SECONDS",
        help="the window --max-repatches counts in (%(default)g)",
    )
    w.add_argument(
        "--uninstall-on-stop",
        action="store_true",
        help="uninstall when stopped (SIGTERM): deleting the DaemonSet takes the guard off",
    )
    p.add_argument(
        "--multus-cache-dir",
        metavar="DIR",
        help="multus thick's cniDir, when its daemon config sets one (default: the cniDir of "
        f"<conf dir>/{multusdaemon.DAEMON_CONFIG} when the node has it, else "
        f"{defaults.MULTUS_CACHE_DIRS[0]})",
    )
    w.add_argument(
        "--live-file",
        metavar="PATH",
        help="write the liveness heartbeat here on every poll, for `live` (in the container's "
        "own dir, not under --root; default: none)",
    )
    w.add_argument(
        "--follow-log",
        metavar="PATH",
        help="print each DEL the guard let through from its decision log (default: its "
        "logFile under --root; '' turns it off)",
    )
    kubeletconf.add_options(p)
    if metrics is not None:
        metrics.add_options(w)


# What each command reads of the layout (the rest may differ between layouts found).
_NEEDS = {
    "install": layouts.FIELDS,
    "uninstall": ("conf_dir", "bin_dirs", "state_dir"),
    "ready": ("conf_dir", "bin_dirs", "state_dir"),
}


def options(args: argparse.Namespace, needs: tuple[str, ...] | None = None) -> actions.Options:
    """The node as this command sees it: the layout's paths (`--layout`, auto: found under
    --root), each replaced by its flag when given, reached through --root."""
    layout = layouts.of(args, _NEEDS[args.command] if needs is None else needs)
    node_conf_dir, node_bin_dir, source = layouts.runtime_dirs(
        layout, args.root, args.conf_dir, args.bin_dir)
    bin_dir = where.located(args.root, node_bin_dir)
    conf_dir = where.located(args.root, node_conf_dir)
    keys: dict[str, Any] = layouts.guard_keys(layout) if args.command == "install" else {}
    guard_keys = (
        ("state_dir", "stateDir"),
        ("log_file", "logFile"),
        ("log_level", "logLevel"),
        ("mode", "mode"),
    )
    for attr, key in guard_keys:
        value = getattr(args, attr, None)
        if value is not None:
            # The conf gets the path as the guard will read it (normalized), never `/../x`.
            keys[key] = where.absolute(value) if key in _PATH_KEYS and value else value
    notes: tuple[str, ...] = ()
    if args.command == "install":
        multus_dir = args.multus_cache_dir or multusdaemon.cni_dir(args.root, node_conf_dir)
        if multus_dir:
            keys["multusCacheDirs"] = multusdaemon.cache_dirs(multus_dir)
        kubelet = kubeletconf.read(args.root, args.kubelet_config, args.runtime_request_timeout)
        keys |= kubelet.keys
        notes = (kubelet.note,)
    bundle_dir = None
    if args.command == "install" and not args.no_bundle:
        bundle_dir = args.bundle_dir or default_bundle_dir()
    return actions.Options(
        root=os.path.normpath(args.root),
        bin_dir=bin_dir,
        conf_dir=conf_dir,
        conf_file=args.conf_file,
        wrap=getattr(args, "wrap", None),
        state_dir=where.under(args.root, args.state_dir or layout.state_dir),
        layout=layout.name,
        source=source,
        log_file=layout.log_file,
        bundle_dir=bundle_dir,
        keys=keys,
        dry_run=getattr(args, "dry_run", False),
        lock_timeout=getattr(args, "lock_timeout", hostlock.DEFAULT_TIMEOUT),
        notes=notes,
    )


def _dirs(args: argparse.Namespace, layout: layouts.Layout) -> tuple[str, str, str]:
    """The bin dir and conf dir the runtime uses now, as seen from here, and where they came
    from: the flag's, the runtime's own config's or the layout's, with the node's links
    followed inside --root (k3s's data/current, MicroK8s' current), so a distribution's upgrade
    that moves a link or rewrites the runtime's config moves them."""
    conf_dir, bin_dir, source = layouts.runtime_dirs(layout, args.root, args.conf_dir,
                                                     args.bin_dir)
    return where.located(args.root, bin_dir), where.located(args.root, conf_dir), source


def _resolver(args: argparse.Namespace, name: str) -> watch.Resolve:
    """What the watcher calls on every poll: the dirs of the layout it started on (never
    chosen again: a layout is not found anew while the node runs), resolved again."""
    layout = layouts.BY_NAME[name]

    def resolve(opts: actions.Options) -> actions.Options:
        bin_dir, conf_dir, source = _dirs(args, layout)
        return dataclasses.replace(opts, bin_dir=bin_dir, conf_dir=conf_dir, source=source)

    return resolve


def default_bundle_dir() -> str:
    if not getattr(sys, "frozen", False):
        raise UsageError("not running from the frozen bundle: pass --bundle-dir DIR or --no-bundle")
    return os.path.dirname(os.path.realpath(sys.executable))


def main(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """`install ...`, `uninstall ...` or `ready ...` on their own (the tests' way in)."""
    out = out if out is not None else sys.stdout
    stderr = err if err is not None else sys.stderr
    try:
        args = build_parser(out, stderr).parse_args(argv)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except UsageError as exc:
        stderr.write(f"{PROG}: usage: {exc}\n")
        return 2
    return run(args, out, stderr)


def run(args: argparse.Namespace, out: TextIO, stderr: TextIO) -> int:
    say = _sayer(stderr, stamp=False)
    try:
        if args.command in ("ready", "live"):
            return _ready(args, out) if args.command == "ready" else _live(args, out)
        if args.command == "install" and args.watch:
            _watch(args, _sayer(out, stamp=True))
            return 0
        wait = args.wait if args.command == "install" else 0.0
        opts = _options_waiting(args, wait, say)
        if args.command == "uninstall":
            actions.uninstall(opts, out, say)
            if args.hold:
                _hold(_sayer(out, stamp=True))
        else:
            _wait_for_conf(opts, args.wait, say)
            actions.install(opts, out, say)
            for note in opts.notes:
                say(note)
    except UsageError as exc:
        say(f"usage: {exc}")
        return 2
    except InstallerError as exc:
        say(str(exc))
        return exc.code
    except OSError as exc:  # fsutil.UnsafeFileError included
        say(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))
        return 1
    return 0


def _sayer(stream: TextIO, stamp: bool) -> actions.Say:
    lock = threading.Lock()  # the watcher's metrics thread says things too: one line at a time

    def say(message: str) -> None:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ ", time.gmtime()) if stamp else ""
        with lock:
            stream.write(f"{when}{PROG}: {message}\n")
            stream.flush()

    return say


def _live(args: argparse.Namespace, out: TextIO) -> int:
    code, line = live.check(args.live_file, time.time(), args.stale, args.grace)
    out.write(line + "\n")
    return code


def _ready(args: argparse.Namespace, out: TextIO) -> int:
    try:
        opts = options(args)
    except layouts.NoLayoutError as exc:
        if not args.uninstalled:
            out.write(f"not ready: {exc}\n")
            return 10
        # No layout's conf and no guard anywhere: the guard is off every layout's dirs; the
        # uninstall record (in the state dir every layout shares) says whether that is so.
        opts = dataclasses.replace(options(args, needs=("state_dir",)), conf_file=None)
    code, line = (ready.uninstalled if args.uninstalled else ready.guarded)(opts)
    if code == 0 and args.live_file and (problem := live.metrics_problem(args.live_file,
                                                                         time.time())):
        code, line = ready.METRICS_NOT_SERVED, f"not ready: {problem}"
    out.write(line + "\n")
    return code


class _StoppedError(Exception):
    """The watcher was stopped while it waited for a layout."""


def _options_waiting(
    args: argparse.Namespace,
    seconds: float,
    say: actions.Say,
    stop: watch.Stop | None = None,
    tick: Callable[[], None] = lambda: None,
) -> actions.Options:
    """options(args), waiting up to `seconds` while `--layout auto` finds no layout yet (at
    boot the network plugin writes its conf after us); _StoppedError when `stop` is set first.
    `tick` runs on each try (the liveness heartbeat: waiting is alive)."""

    def get() -> actions.Options:
        tick()
        return options(args)

    return _waiting(get, layouts.NoLayoutError, seconds, say, stop)


def _heartbeat(args: argparse.Namespace, counts: watch.Counts) -> Callable[[], None]:
    """The liveness heartbeat of `--live-file` (a no-op without it)."""
    if not args.live_file:
        return lambda: None
    heart = live.Heartbeat(args.live_file)
    return lambda: heart.beat(counts.unfixed, counts.metrics)


def _wait_for_conf(opts: actions.Options, seconds: float, say: actions.Say) -> None:
    """At boot the network plugin writes its conf after us: wait for it, bounded."""
    _waiting(lambda: confdir.pick(opts.conf_dir, opts.conf_file), NoConfError, seconds, say)


def _waiting(
    get: Callable[[], _T],
    missing: type[Exception],
    seconds: float,
    say: actions.Say,
    stop: watch.Stop | None = None,
) -> _T:
    """get(), retried every 0.2 s while it raises `missing`, for up to `seconds` (saying so
    once); _StoppedError when `stop` is set first."""
    deadline, said = time.monotonic() + seconds, False
    while True:
        try:
            return get()
        except missing as exc:
            if time.monotonic() >= deadline:
                raise
            if not said:
                until = f"up to {seconds:g} s" if seconds != math.inf else "for as long as it takes"
                say(f"{exc}; waiting ({until})")
                said = True
        if stop is None:
            time.sleep(0.2)
        elif stop.wait(0.2):
            raise _StoppedError


def _stop_event() -> watch.SignalStop:
    stop = watch.SignalStop()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    return stop


def _hold(say: actions.Say) -> None:
    say("uninstalled; holding until stopped")
    _stop_event().wait()


def _watch(args: argparse.Namespace, say: actions.Say) -> None:
    if args.dry_run:
        raise UsageError("--watch and --dry-run do not go together")
    if args.metrics is not None:
        args.metrics.check(args)
    stop = _stop_event()
    counts = watch.Counts()
    beat = _heartbeat(args, counts)
    try:
        opts = _options_waiting(args, math.inf, say, stop, beat)
    except _StoppedError:
        say("watch: stopped")
        return
    limits = watch.Limits(
        interval=args.watch_interval,
        settle=min(0.5, args.watch_interval),
        max_repatches=args.max_repatches,
        window=args.repatch_window,
    )
    say(
        f"watching {opts.conf_dir} and {opts.bin_dir} "
        f"(layout {opts.layout}, dirs from the {opts.source}, every {limits.interval:g} s)"
    )
    for note in opts.notes:
        say(note)
    if args.assess is not None:
        say(f"assess: {args.assess(args.root, opts.layout)}")
    _start(opts, say)
    metrics = None
    if args.metrics is not None:
        metrics = args.metrics.start(args, opts, _guard_log(args, opts), counts, say)
    tasks = [*_tasks(args, opts, say), watch.Periodic(limits.interval, beat)]
    try:
        opts = watch.run(opts, limits, stop, say, tasks=tasks, counts=counts,
                         resolve=_resolver(args, opts.layout))
    finally:
        if metrics is not None:
            metrics.stop()
    say("watch: stopped")
    if args.uninstall_on_stop:
        actions.uninstall(opts, io.StringIO(), say)


def _start(opts: actions.Options, say: actions.Say) -> None:
    """A new install: lift an uninstall record and put the bundle in; the loop wraps."""
    with hostlock.held(opts.state_dir, opts.lock_timeout):
        if record.clear_uninstalled(opts.state_dir):
            say("a new install: lifted the uninstall record")
        if opts.bundle_dir is not None:
            actions.install_bundle(opts, say)


def _guard_log(args: argparse.Namespace, opts: actions.Options) -> str:
    """The guard's decision log as seen from here ('' when it is turned off)."""
    if args.log_file == "":
        return ""
    return where.under(args.root, args.log_file or opts.log_file)


def _tasks(
    args: argparse.Namespace, opts: actions.Options, say: actions.Say
) -> list[watch.Periodic]:
    log = _guard_log(args, opts) if args.follow_log is None else args.follow_log
    if not log:
        return []
    return [watch.Periodic(args.watch_interval, follow.Follower(log, say).poll)]

