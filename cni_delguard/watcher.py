"""`cni-delguard install --watch`: the long-running installer, assembled from the floors below.

The watch loop keeps the conf wrapped and the bundle whole (node/watch.py); at start it logs
what `assess` says the guard fixes on this node (ops/assess); while it runs, the metrics
thread serves and writes the watcher's series (monitoring/exporter.py). This module sits above
all three and imports each directly; node/ knows nothing of assess or of the metrics.

Every line goes to stdout with a UTC time (what `kubectl logs` shows); errors become an exit
code where node/cli.py maps them (`exit_code`).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import math
from collections.abc import Callable
from typing import TextIO

from cni_delguard.host import dirs, layouts
from cni_delguard.host.root import NodeRoot
from cni_delguard.monitoring import exporter
from cni_delguard.node import actions, follow, hostlock, live, record, watch
from cni_delguard.node import cli as node_cli
from cni_delguard.tooling import UsageError


def add_options(install: argparse.ArgumentParser) -> None:
    """`install`'s long-running options (the metrics' among them), and `install` run here."""
    w = install.add_argument_group("long-running mode")
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
    exporter.add_options(w)
    install.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO, stderr: TextIO) -> int:
    """`install`: with `--watch`, the watcher; without, node/cli.py's one-shot install."""
    if not args.watch:
        return node_cli.run(args, out, stderr)
    return node_cli.exit_code(node_cli.sayer(stderr, stamp=False),
                              lambda: watch_node(args, node_cli.sayer(out, stamp=True)))


def watch_node(args: argparse.Namespace, say: actions.Say) -> int:
    if args.dry_run:
        raise UsageError("--watch and --dry-run do not go together")
    exporter.check(args)
    stop = node_cli.stop_event()
    counts = watch.Counts()
    beat = _heartbeat(args, counts)
    try:
        opts = node_cli.options_waiting(args, math.inf, say, stop, beat)
    except node_cli.StoppedError:
        say("watch: stopped")
        return 0
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
    for note in opts.notes:  # where the timeouts came from (node/kubeletconf.py)
        say(note)
    say(f"assess: {_assessed(args.root, opts.layout)}")
    _start(opts, say)
    metrics = exporter.start(args, opts, _guard_log(args, opts), counts, say)
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
    return 0


def _assessed(root: str, layout: str) -> str:
    """assess's summary of this node (imported here only: the one-shot commands never pay
    for it)."""
    from cni_delguard.ops.assess import summary_line

    return summary_line(root, layout)


def _heartbeat(args: argparse.Namespace, counts: watch.Counts) -> Callable[[], None]:
    """The liveness heartbeat of `--live-file` (a no-op without it)."""
    if not args.live_file:
        return lambda: None
    heart = live.Heartbeat(args.live_file)
    return lambda: heart.beat(counts.unfixed, counts.metrics)


def _resolver(args: argparse.Namespace, layout: str) -> watch.Resolve:
    """What the watcher calls on every poll: the dirs of the layout it started on (never
    chosen again: a layout is not found anew while the node runs), resolved again, so a
    distribution's upgrade that moves a link or rewrites the runtime's config moves them."""
    row = layouts.BY_NAME[layout]

    def resolve(current: actions.Options) -> actions.Options:
        now = dirs.of_layout(args.root, row, conf_dir=args.conf_dir, bin_dir=args.bin_dir)
        return dataclasses.replace(current, bin_dir=now.bin_here, conf_dir=now.conf_here,
                                   source=now.source)

    return resolve


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
    return NodeRoot(args.root).here(args.log_file or opts.log_file)


def _tasks(
    args: argparse.Namespace, opts: actions.Options, say: actions.Say
) -> list[watch.Periodic]:
    log = _guard_log(args, opts) if args.follow_log is None else args.follow_log
    if not log:
        return []
    return [watch.Periodic(args.watch_interval, follow.Follower(log, say).poll)]
