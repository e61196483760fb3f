"""The watcher's metrics, beside the guarding and never in its way: one thread that refreshes a
`Feed` every `interval` seconds (the log read since the last look, the markers, the ready check),
writes the textfile when asked to, and keeps the scrape endpoint (endpoint.py) up.

The node's protection never depends on monitoring: an address that cannot be bound or parsed,
a textfile that cannot be written, a refresh that fails, is one line in the watcher's log (said
again only when it changes) and the watch loop goes on; the bind is tried again every interval, so
a port held by a process that has since gone is taken once it is free. A scrape never waits on a
refresh: it renders the last snapshot.

The watcher (cni_delguard/watcher.py, the floor above) calls `add_options`, `check` and
`start`. The Feed it starts is feed.py's WatcherFeed, imported only when a watcher asks for
metrics.
"""

from __future__ import annotations

import argparse
import errno
import os
import threading
from typing import Any, Protocol

from cni_delguard.host.root import NodeRoot
from cni_delguard.monitoring import endpoint
from cni_delguard.node import actions, watch
from cni_delguard.tooling import UsageError


class Said(Protocol):
    """Where the watcher keeps what its heartbeat carries (watch.Counts)."""

    metrics: str


class Feed(Protocol):
    def refresh(self) -> None: ...
    def render(self, accept: str) -> tuple[bytes, str]: ...
    def write(self, path: str) -> None: ...


def add_options(w: Any) -> None:
    """`install`'s metrics options, in its "long-running mode" group."""
    w.add_argument(
        "--metrics-address",
        default="",
        metavar="IP:PORT",
        help="serve Prometheus metrics at http://IP:PORT/metrics (':PORT' every address; an IP "
        f"alone: port {endpoint.DEFAULT_PORT}); off by default",
    )
    w.add_argument(
        "--metrics-file",
        metavar="PATH",
        help="refresh node-exporter textfile metrics at this host path (under --root); off "
        "by default",
    )
    w.add_argument(
        "--metrics-interval",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="read what is new for the metrics this often (%(default)g)",
    )
    w.add_argument(
        "--stuck-after",
        type=float,
        metavar="SECONDS",
        help="a strict DEL failing this long counts in cni_delguard_stuck_strict_dels "
        "(default: doctor's threshold, 600)",
    )


def check(args: argparse.Namespace) -> None:
    """Before the watcher starts: what would make the metrics thread misbehave (UsageError)."""
    if not args.metrics_interval > 0:  # also NaN: the metrics thread would spin
        raise UsageError(f"--metrics-interval {args.metrics_interval:g}: give a number of seconds")


def start(
    args: argparse.Namespace,
    opts: actions.Options,
    log_file: str,
    counts: watch.Counts,
    say: actions.Say,
) -> Exporter | None:
    """The metrics thread of `install --watch`, started; None when no option asks for it."""
    if not (args.metrics_address or args.metrics_file):
        return None
    from cni_delguard.monitoring.feed import Plan, WatcherFeed

    plan = Plan(opts, log_file, counts, args.stuck_after, args.metrics_interval)
    textfile = NodeRoot(args.root).here(args.metrics_file) if args.metrics_file else None
    metrics = Exporter(WatcherFeed(plan), args.metrics_address, textfile, plan.interval, say,
                       counts)
    metrics.start()
    return metrics


class Exporter:
    def __init__(
        self,
        feed: Feed,
        address: str,
        textfile: str | None,
        interval: float,
        say: actions.Say,
        counts: Said | None = None,
    ) -> None:
        self.feed, self.address, self.textfile = feed, address, textfile
        self.counts = counts
        self.interval, self.say, self.said = interval, say, watch.Once(say)
        self.endpoint: endpoint.Endpoint | None = None
        self.bind: tuple[str, int] | None = None
        if address:
            try:
                self.bind = endpoint.parse_address(endpoint.expand(address, os.environ))
            except endpoint.AddressError as exc:
                say(f"metrics: --metrics-address {exc}; serving no metrics (still guarding)")
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="cni-delguard-metrics", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(10)
        if self.endpoint is not None:
            self.endpoint.close()

    def _run(self) -> None:
        while not self.stopped.is_set():
            problems = "; ".join(p for p in (self._refresh(), self._write(), self._listen()) if p)
            self.said(problems)
            self.stopped.wait(self.interval)

    def _refresh(self) -> str:
        try:
            self.feed.refresh()
        except Exception as exc:  # noqa: BLE001 - monitoring must never stop the guarding
            return f"metrics: cannot refresh: {exc!r}"
        return ""

    def _write(self) -> str:
        if not self.textfile:
            return ""
        try:
            self.feed.write(self.textfile)
        except OSError as exc:  # a full or read-only dir
            return f"metrics: cannot write {self.textfile}: {exc.strerror or exc}"
        return ""

    def _listen(self) -> str:
        if self.bind is None or self.endpoint is not None:
            return ""
        try:
            listening = endpoint.Endpoint(*self.bind, self.feed.render)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE and self.counts is not None:
                # Another process listens there, and could answer for this node: the pod's
                # readiness probe says so (`ready --live-file`) until the port is this one's.
                self.counts.metrics = (f"metrics: {endpoint.show(*self.bind)} is held by another "
                                       "process; its metrics are not this watcher's")
            return (
                f"metrics: cannot listen on {endpoint.show(*self.bind)}: {exc}; the node is "
                f"still guarded, trying again every {self.interval:g} s"
            )
        if self.counts is not None:
            self.counts.metrics = ""
        listening.start()
        self.say(f"metrics: serving http://{listening.address}{endpoint.PATH}")
        # Published once serving and said: whoever sees the endpoint sees the log line too.
        self.endpoint = listening
        return ""
