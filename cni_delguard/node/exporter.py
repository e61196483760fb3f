"""The watcher's metrics, beside the guarding and never in its way: one thread that refreshes a
`Feed` every `interval` seconds (the log read since the last look, the markers, the ready check),
writes the textfile when asked to, and keeps the scrape endpoint (endpoint.py) up.

The node's protection never depends on monitoring: an address that cannot be bound or parsed,
a textfile that cannot be written, a refresh that fails, is one line in the watcher's log (said
again only when it changes) and the watch loop goes on; the bind is tried again every interval, so
a port held by a process that has since gone is taken once it is free. A scrape never waits on a
refresh: it renders the last snapshot.

node/ cannot import ops/ (the floor plan): the Feed comes from `cni_delguard.cli`, which connects
ops/feed.py's WatcherFeed (node/cli.py's `register(sub, metrics=...)`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from cni_delguard.node import actions, endpoint, watch


class Feed(Protocol):
    def refresh(self) -> None: ...
    def render(self, accept: str) -> tuple[bytes, str]: ...
    def write(self, path: str) -> None: ...


@dataclass(frozen=True)
class Plan:
    """What the watcher tells the metrics side."""

    opts: actions.Options  # the node as the installer sees it (for the ready check)
    log_file: str  # the guard's decision log, as seen from here ('' when there is none)
    counts: watch.Counts  # what the watch loop did
    stuck_after: float | None = None  # None: the doctor's threshold
    interval: float = 15.0  # seconds between refreshes (--metrics-interval)


FeedFactory = Callable[[Plan], Feed]


class Exporter:
    def __init__(
        self,
        feed: Feed,
        address: str,
        textfile: str | None,
        interval: float,
        say: actions.Say,
    ) -> None:
        self.feed, self.address, self.textfile = feed, address, textfile
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
            self.endpoint = endpoint.Endpoint(*self.bind, self.feed.render)
        except OSError as exc:
            return (
                f"metrics: cannot listen on {endpoint.show(*self.bind)}: {exc}; the node is "
                f"still guarded, trying again every {self.interval:g} s"
            )
        self.endpoint.start()
        self.say(f"metrics: serving http://{self.endpoint.address}{endpoint.PATH}")
        return ""
