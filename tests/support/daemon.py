"""One lifecycle for every long-running process a test starts (a runtime, multus-daemon, the
kube-ovn daemon stand-in, Prometheus, Alertmanager, a registry, the installer's watch loop).

A `Daemon` is started with its output appended to one log (a banner line before each start), and
is ready when it SAYS so (an `Announcement`): a line it logs, a record it appends, a file it
writes, or an answer on its own API, each only counted when made after this start. Never the mere
existence of its socket, port or pid file: a server binds before it serves, and a check that
sees the bind races the daemon's own "ready" (a cold CI run saw the kube-ovn stand-in's socket
before its "listening" record). A daemon that exits while it is awaited fails the wait at once
with its log's tail.

It stops with grace (SIGTERM, a bounded wait, then SIGKILL), is killed (SIGKILL, optionally its
children first: the delegates a runtime or multus still runs), or is reaped after its node's
power-off killed it. `pid`, `poll()` and `wait()` are a process's, so code written for a
`subprocess.Popen` takes a Daemon as well.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tests.support.waiting import descendants, wait_for, wait_gone

STOP_GRACE = 30.0  # s a daemon gets after SIGTERM before SIGKILL
BANNER = "===== start {n} ====="  # before each start in the log (CRI-O's conf check reads it)


class Announcement(Protocol):
    """What a daemon says when it is ready; `mark()` before each start forgets what it said
    before, `said()` is truthy (the value the caller wants: a match, an address) once it has."""

    what: str

    def mark(self) -> None: ...

    def said(self) -> object: ...


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _since(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


@dataclass
class LogLine:
    """A line matching `pattern` in `path` written after the mark; said() is the match (its
    groups are what the daemon told: an address, a port)."""

    path: Path
    pattern: str
    what: str = ""
    _offset: int = 0

    def __post_init__(self) -> None:
        self.what = self.what or f"{self.pattern!r} in {self.path.name}"

    def mark(self) -> None:
        self._offset = _size(self.path)

    def said(self) -> re.Match[str] | None:
        return re.search(self.pattern, _since(self.path, self._offset), re.M)


@dataclass
class Record:
    """A JSON line of `path`, appended after the mark, for which `match(entry)` holds."""

    path: Path
    match: Callable[[dict[str, Any]], bool]
    what: str = "its record"
    _offset: int = 0

    def mark(self) -> None:
        self._offset = _size(self.path)

    def said(self) -> dict[str, Any] | None:
        for line in _since(self.path, self._offset).splitlines(keepends=True):
            if not line.endswith("\n"):
                break  # a line being written: read again at the next check
            entry = json.loads(line)
            if self.match(entry):
                return dict(entry)
        return None


def file_stamp(path: Path) -> tuple[int, int] | None:
    """A file's (inode, mtime in ns): a rewrite in place or by rename changes it."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


@dataclass
class FileWritten:
    """A file the daemon writes once it serves (multus-daemon's 00-multus.conf), written anew
    after the mark: one left by a predecessor that died does not count."""

    path: Path
    what: str = ""
    _left: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        self.what = self.what or f"it to write {self.path.name}"

    def mark(self) -> None:
        self._left = file_stamp(self.path)

    def said(self) -> bool:
        now = file_stamp(self.path)
        return now is not None and now != self._left


@dataclass
class Answer:
    """Its own API's answer that it is ready (an HTTP /-/ready, a version call): asked at each
    check, so nothing to mark."""

    probe: Callable[[], object]
    what: str

    def mark(self) -> None:
        """An answer is always this process's: nothing said before counts."""

    def said(self) -> object:
        return self.probe()


def http_ready(url: str) -> bool:
    """Whether a server answers 200 on `url` (Prometheus's and Alertmanager's /-/ready: they
    answer it once they serve, not when their port is bound)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 - loopback, the test's
            return bool(r.status == 200)
    except OSError:
        return False


def unix_http_status(path: Path, url: str, timeout: float = 2) -> int | None:
    """The status of GET `url` over the unix socket `path`, None when nothing answers: a server
    that listens before it serves (CRI-O: its socket is bound before its services are made)
    accepts the connection but answers only once it serves."""
    with contextlib.closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(str(path))
            conn.sendall(f"GET {url} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
                         .encode())
            head = conn.recv(64).decode(errors="replace")
        except OSError:
            return None
    found = re.match(r"HTTP/1\.[01] (\d{3}) ", head)
    return int(found.group(1)) if found else None


def free_port() -> int:
    """A loopback port free now, for a daemon that must be told its port (Prometheus,
    Alertmanager); one that can pick its own says which in its log instead (the registry)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DaemonExitedError(RuntimeError):
    pass


@dataclass
class Daemon:
    """A process started from `argv` (a node's enter prefix included), its stdout and stderr
    appended to `log`, ready when `ready` says so."""

    name: str
    argv: Sequence[str]
    log: Path
    ready: Announcement | None = None
    env: Mapping[str, str] | None = None
    start_bound: float = 60.0  # s from start to its announcement
    more_logs: tuple[Path, ...] = ()  # logs it writes itself, tailed with `log` on failure
    check_every: float = 0.05  # s between readiness checks (longer for one that runs a process)
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    starts: int = 0

    @classmethod
    def adopt(cls, name: str, proc: subprocess.Popen[bytes], log: Path) -> Daemon:
        """A process started some other way, to be ended the one way."""
        return cls(name, list(map(str, proc.args)) if isinstance(proc.args, list) else [],
                   log, proc=proc, starts=1)

    # --- starting -----------------------------------------------------------------------------

    def start(self, wait: bool = True) -> object:
        """Start it; with `wait`, return what it said when ready (see wait_ready)."""
        assert self.proc is None or self.proc.poll() is not None, f"{self.name} runs already"
        if self.ready is not None:
            self.ready.mark()
        self.starts += 1
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            out.write(f"\n{BANNER.format(n=self.starts)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                list(self.argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=None if self.env is None else dict(self.env))
        return self.wait_ready() if wait else None

    def wait_ready(self, timeout: float | None = None) -> object:
        """Until it has said it is ready; fails at once when it exits first."""
        ready = self.ready
        if ready is None:
            return True

        def said() -> object:
            value = ready.said()  # before the exit check: a daemon may say it and then exit
            if not value:
                self._fail_if_exited()
            return value

        return wait_for(said, f"{self.name} to say it is ready ({ready.what})",
                        timeout=self.start_bound if timeout is None else timeout,
                        every=self.check_every,
                        detail=self.log_tail)

    def _fail_if_exited(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise DaemonExitedError(f"{self.name} exited with {self.proc.returncode}:\n"
                                    f"{self.log_tail()}")

    # --- what a process offers ------------------------------------------------------------------

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} was never started"
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.returncode

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout: float | None = None) -> int:
        assert self.proc is not None, f"{self.name} was never started"
        return self.proc.wait(timeout=timeout)

    # --- ending -------------------------------------------------------------------------------

    def end_children(self) -> list[int]:
        """SIGKILL every process below it (the delegates it runs), and wait until they are
        gone; returns them."""
        if not self.running():
            return []
        children = descendants(self.pid)
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        wait_gone(children, f"{self.name}'s children to exit")
        return children

    def stop(self, grace: float = STOP_GRACE) -> int | None:
        """SIGTERM, up to `grace` seconds for it to exit, then SIGKILL; its exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_GRACE)
        return self.proc.returncode

    def kill(self, children: bool = False) -> list[int]:
        """SIGKILL now (with `children`, its children too, as a crash of its node would: the
        CNI plugins a runtime runs); returns the children it killed."""
        if self.proc is None:
            return []
        found = descendants(self.pid) if children and self.running() else []
        if self.proc.poll() is None:
            self.proc.kill()
        for child in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        self.proc.wait(timeout=STOP_GRACE)
        wait_gone(found, f"{self.name}'s children to exit")
        return found

    def reap(self, timeout: float = 30) -> int | None:
        """Its node was powered off, which killed it: wait for that; one that outlives its node
        (it did not run in it) fails."""
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} outlived its node's power-off: it does not run "
                                 "in the node") from None

    # --- its log ------------------------------------------------------------------------------

    def log_text(self) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        tails = ["\n".join(self.log_text().splitlines()[-lines:])]
        for path in self.more_logs:
            with contextlib.suppress(OSError):
                text = path.read_text(encoding="utf-8", errors="replace")
                tails.append(f"--- {path.name}:\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(tails)
