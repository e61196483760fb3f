"""Follow the guard's decision log as it grows: `Tail` reads what was appended since the last
look, and `Follower` prints the DELs the guard let through into the installer's own output
(`kubectl logs`). The watcher's metrics read the log through a Tail of their own
(monitoring/feed.py).

The guard writes one JSON line per decision to its logFile (guard/log.py), rotated to `.1` at
10 MiB (a rename, then a new file). A Tail keeps the inode and offset it has read up to; when the
path names another inode, it first finishes the old file (now `.1`, recognised by its inode) and
then starts the new one at 0, so no line is lost to a rotation between two looks (two rotations
between two looks would lose the middle generation: 10 MiB of log written in one interval). A
look reads at most `max_read` bytes (1 MiB); a line longer than MAX_LINE (no guard line is) is
dropped and counted. It never follows a symlink and never blocks on a FIFO.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable

LET_THROUGH = ("skip", "forward-lenient")
MAX_READ = 1024 * 1024
MAX_LINE = 1024 * 1024
_FIELDS = ("network", "containerID", "ifname", "decision", "reason")
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class Tail:
    """The complete lines appended to `path` since the last `read()`."""

    def __init__(self, path: str, max_read: int = MAX_READ) -> None:
        self.path, self.max_read = path, max_read
        self.inode: int | None = None
        self.offset = 0
        self.partial = b""
        self.overlong = 0  # lines dropped for being longer than MAX_LINE
        self.errors = 0  # looks that failed for another reason than "no log yet"
        self.readable = False  # the last look could read the log
        self.behind = False  # the last look stopped at max_read: there is more to read
        self._seek_end()

    def _seek_end(self) -> None:
        """Start at the end: what was written before is history (no replay after a restart)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return
        self.inode, self.offset = st.st_ino, st.st_size

    def read(self) -> list[bytes]:
        try:
            fd = os.open(self.path, _OPEN)
        except FileNotFoundError:
            self.readable = False
            return []
        except OSError:
            self._failed()
            return []
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self._failed()
                return []
            lines: list[bytes] = []
            if st.st_ino != self.inode:
                lines = self._finish_rotated()
                self.inode, self.offset, self.partial = st.st_ino, 0, b""
            elif st.st_size < self.offset:  # truncated in place
                self.offset, self.partial = 0, b""
            data = os.pread(fd, self.max_read, self.offset)
        except OSError:
            self._failed()
            return []
        finally:
            os.close(fd)
        self.readable = True
        self.behind = len(data) == self.max_read
        self.offset += len(data)
        return lines + self._split(data)

    def _finish_rotated(self) -> list[bytes]:
        """What was appended to the old file after our last look, if `.1` is that file."""
        if self.inode is None:
            return []
        try:
            fd = os.open(self.path + ".1", _OPEN)
        except OSError:
            return []
        try:
            st = os.fstat(fd)
            if st.st_ino != self.inode or not stat.S_ISREG(st.st_mode):
                return []
            data = os.pread(fd, self.max_read, self.offset)
        except OSError:
            return []
        finally:
            os.close(fd)
        lines = self._split(data)
        self.partial = b""  # a last line without its newline stays incomplete for ever
        return lines

    def _split(self, data: bytes) -> list[bytes]:
        *lines, self.partial = (self.partial + data).split(b"\n")
        if len(self.partial) > MAX_LINE:
            self.partial, self.overlong = b"", self.overlong + 1
        kept = [line for line in lines if len(line) <= MAX_LINE]
        self.overlong += len(lines) - len(kept)
        return kept

    def _failed(self) -> None:
        self.readable = False
        self.errors += 1


class Follower:
    def __init__(self, path: str, emit: Callable[[str], None]) -> None:
        self.tail, self.emit = Tail(path), emit

    def poll(self) -> None:
        for line in self.tail.read():
            if text := describe(line):
                self.emit(text)


def describe(line: bytes) -> str | None:
    """The one line printed for a decision record, or None if it is not a DEL let through."""
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if not isinstance(rec, dict) or rec.get("command") != "DEL":
        return None
    if rec.get("decision") not in LET_THROUGH:
        return None
    fields = " ".join(f"{k}={rec.get(k)}" for k in _FIELDS if rec.get(k) is not None)
    return f"guard: DEL let through without the delegate's success: {fields}"
