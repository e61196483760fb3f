"""Command line of `cni-delguard install`, `uninstall`, `live` and `ready` (one-shot).

`register(sub)` adds them to cni_delguard.cli's subcommands and returns their parsers by name;
`main(argv)` runs them on their own (the tests' way in). One-shot messages go to stderr and
`--dry-run` prints the diff on stdout. This is the one place where errors become a single line on
stderr and an exit code (the table is in errors.py; `ready` has its own, in ready.py).

`install --watch`, the long-running installer, is assembled one floor up (cni_delguard/
watcher.py: the watch loop, assess's summary and the metrics); it takes the node's options, the
waiting and the error-to-exit-code mapping from here (`node_options`, `waiting`, `run`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO, TypeVar

from cni_delguard.guard import defaults
from cni_delguard.host import dirs, layouts
from cni_delguard.host.root import absolute
from cni_delguard.node import (
    actions,
    confdir,
    hostlock,
    kubeletconf,
    live,
    multusdaemon,
    options,
    purge,
    ready,
    watch,
)
from cni_delguard.node.errors import InstallerError, NoConfError
from cni_delguard.tooling import Parser, UsageError

_T = TypeVar("_T")

PROG = "cni-delguard"
# Guard keys that are paths: normalized before they are written into the conf.
_PATH_KEYS = ("stateDir", "logFile")


def build_parser(out: TextIO | None = None, err: TextIO | None = None) -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG, description="Put cni-delguard on a node, or take it off.", out=out, err=err
    )
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def register(sub: Any) -> dict[str, argparse.ArgumentParser]:
    """Add `install`, `uninstall`, `live` and `ready` to a parser's subcommands; their parsers
    by name (cni_delguard/watcher.py adds `install`'s long-running options)."""
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
    alive.set_defaults(run=run)
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
        p.set_defaults(run=run)
    for p in (inst, uninst):  # a probe changes nothing, waits for no lock and wraps nothing
        _add_change(p)
    _add_install(inst)
    uninst.add_argument(
        "--hold", action="store_true", help="after uninstalling, stay running until SIGTERM"
    )
    uninst.add_argument(
        "--purge", action="store_true", help="then empty the guard's state and log dirs (with "
        "--hold: and remove them when the hold ends); node/purge.py"
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
    return {"install": inst, "uninstall": uninst, "live": alive, "ready": probe}


def _add_where(p: argparse.ArgumentParser) -> None:
    """Where the node keeps what the command looks at (every one of the three)."""
    layouts.add_option(p)
    options.add(p, "bin_dir", "conf_dir")
    p.add_argument(
        "--conf-file",
        metavar="NAME",
        help="conf file in the conf dir (default: the "
        "one the runtime uses, the first .conf/.conflist/.json by name)",
    )
    kept = "the installer keeps originals, its lock and the uninstall record in DIR/installer"
    options.add(
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


def _add_install(p: argparse.ArgumentParser) -> None:
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
    p.add_argument(
        "--multus-cache-dir",
        metavar="DIR",
        help="multus thick's cniDir, when its daemon config sets one (default: the cniDir of "
        f"<conf dir>/{multusdaemon.DAEMON_CONFIG} when the node has it, else "
        f"{defaults.MULTUS_CACHE_DIRS[0]})",
    )
    kubeletconf.add_options(p)


# What each command reads of the layout (the rest may differ between layouts found).
_NEEDS = {
    "install": layouts.FIELDS,
    "uninstall": ("conf_dir", "bin_dirs", "state_dir"),
    "ready": ("conf_dir", "bin_dirs", "state_dir"),
}


def node_dirs(args: argparse.Namespace, needs: tuple[str, ...] | None = None) -> dirs.NodeDirs:
    """The node's dirs as this command sees them: the layout's (`--layout`, auto: found under
    --root), the runtime's config's, each replaced by its flag when given."""
    return dirs.find(args.root, args.layout, conf_dir=args.conf_dir, bin_dir=args.bin_dir,
                     state_dir=args.state_dir,
                     needs=_NEEDS[args.command] if needs is None else needs)


def node_options(args: argparse.Namespace, needs: tuple[str, ...] | None = None) -> actions.Options:
    """The node as this command sees it (node_dirs), and what the command does there."""
    found = node_dirs(args, needs)
    keys: dict[str, Any] = layouts.guard_keys(found.layout) if args.command == "install" else {}
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
            keys[key] = absolute(value) if key in _PATH_KEYS and value else value
    notes: tuple[str, ...] = ()
    if args.command == "install":
        multus_dir = args.multus_cache_dir or multusdaemon.cni_dir(found.root, found.conf_dir)
        if multus_dir:
            keys["multusCacheDirs"] = multusdaemon.cache_dirs(multus_dir)
        kubelet = kubeletconf.read(args.root, args.kubelet_config, args.runtime_request_timeout)
        keys |= kubelet.keys
        notes = (kubelet.note,)
    bundle_dir = None
    if args.command == "install" and not args.no_bundle:
        bundle_dir = args.bundle_dir or default_bundle_dir()
    return actions.Options(
        root=found.root.path,
        bin_dir=found.bin_here,
        conf_dir=found.conf_here,
        conf_file=args.conf_file,
        wrap=getattr(args, "wrap", None),
        state_dir=found.state_here,
        layout=found.layout.name,
        source=found.source,
        log_file=found.layout.log_file,
        bundle_dir=bundle_dir,
        keys=keys,
        dry_run=getattr(args, "dry_run", False),
        lock_timeout=getattr(args, "lock_timeout", hostlock.DEFAULT_TIMEOUT),
        notes=notes,
    )


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
    if args.command in ("ready", "live"):
        return exit_code(sayer(stderr, stamp=False),
                         lambda: _ready(args, out) if args.command == "ready" else _live(args, out))
    return exit_code(sayer(stderr, stamp=False), lambda: _one_shot(args, out, stderr))


def _one_shot(args: argparse.Namespace, out: TextIO, stderr: TextIO) -> int:
    say = sayer(stderr, stamp=False)
    wait = args.wait if args.command == "install" else 0.0
    opts = options_waiting(args, wait, say)
    if args.command == "uninstall":
        actions.uninstall(opts, out, say)
        if args.purge and not opts.dry_run:
            purge.empty(opts, say)
        if args.hold:
            _hold(sayer(out, stamp=True))
            if args.purge:
                purge.finish(opts, sayer(out, stamp=True))
    else:
        _wait_for_conf(opts, args.wait, say)
        actions.install(opts, out, say)
        for note in opts.notes:  # where the timeouts came from (kubeletconf.py)
            say(note)
    return 0


def exit_code(say: actions.Say, body: Callable[[], int]) -> int:
    """body()'s exit code, or the one its error maps to, said in one line (errors.py's table)."""
    try:
        return body()
    except UsageError as exc:
        say(f"usage: {exc}")
        return 2
    except (InstallerError, layouts.NoLayoutError) as exc:
        say(str(exc))
        return exc.code
    except OSError as exc:  # fsutil.UnsafeFileError included
        say(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))
        return 1


def sayer(stream: TextIO, stamp: bool) -> actions.Say:
    """One line at a time on `stream`, `cni-delguard: ` first (and a UTC time, `stamp`)."""
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
        opts = node_options(args)
    except layouts.NoLayoutError as exc:
        if not args.uninstalled:
            out.write(f"not ready: {exc}\n")
            return 10
        # No layout's conf and no guard anywhere: the guard is off every layout's dirs; the
        # uninstall record (in the state dir every layout shares) says whether that is so.
        opts = dataclasses.replace(node_options(args, needs=("state_dir",)), conf_file=None)
    code, line = (ready.uninstalled if args.uninstalled else ready.guarded)(opts)
    if code == 0 and args.live_file and (problem := live.metrics_problem(args.live_file,
                                                                         time.time())):
        code, line = ready.METRICS_NOT_SERVED, f"not ready: {problem}"
    out.write(line + "\n")
    return code


class StoppedError(Exception):
    """The watcher was stopped while it waited for a layout."""


def options_waiting(
    args: argparse.Namespace,
    seconds: float,
    say: actions.Say,
    stop: watch.Stop | None = None,
    tick: Callable[[], None] = lambda: None,
) -> actions.Options:
    """options(args), waiting up to `seconds` while `--layout auto` finds no layout yet (at
    boot the network plugin writes its conf after us); StoppedError when `stop` is set first.
    `tick` runs on each try (the liveness heartbeat: waiting is alive)."""

    def get() -> actions.Options:
        tick()
        return node_options(args)

    return waiting(get, layouts.NoLayoutError, seconds, say, stop)


def _wait_for_conf(opts: actions.Options, seconds: float, say: actions.Say) -> None:
    """At boot the network plugin writes its conf after us: wait for it, bounded."""
    waiting(lambda: confdir.pick(opts.conf_dir, opts.conf_file), NoConfError, seconds, say)


def waiting(
    get: Callable[[], _T],
    missing: type[Exception],
    seconds: float,
    say: actions.Say,
    stop: watch.Stop | None = None,
) -> _T:
    """get(), retried every 0.2 s while it raises `missing`, for up to `seconds` (saying so
    once); StoppedError when `stop` is set first."""
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
            raise StoppedError


def stop_event() -> watch.SignalStop:
    """Set by SIGTERM or SIGINT (handlers installed from the main thread only)."""
    stop = watch.SignalStop()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    return stop


def _hold(say: actions.Say) -> None:
    stop = stop_event()  # first: a SIGTERM right after the line below must end the hold cleanly
    say("uninstalled; holding until stopped")
    stop.wait()
