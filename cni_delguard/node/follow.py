"""Follow the guard's decision log into the installer's own output (`kubectl logs`).

The guard writes one JSON line per decision to its logFile (guard/log.py), rotated to `.1` at
10 MiB. The watcher reads what was appended since its last poll and prints one line for each DEL
the guard let through without the delegate's success (decision `skip` or `forward-lenient`, the
ones `cni-delguard stats` lists): those are the sandboxes the guard unblocked, what an operator
looks for. It starts at the end of the file (no replay of history after a restart), follows a
rotation by the inode, and reads at most 1 MiB per poll.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

LET_THROUGH = ("skip", "forward-lenient")
_MAX_READ = 1024 * 1024
_FIELDS = ("network", "containerID", "ifname", "decision", "reason")


class Follower:
    def __init__(self, path: str, emit: Callable[[str], None]) -> None:
        self.path, self.emit = path, emit
        self.inode: int | None = None
        self.offset = 0
        self.partial = b""
        self._open_at_end()

    def _open_at_end(self) -> None:
        try:
            st = os.stat(self.path)
        except OSError:
            return
        self.inode, self.offset = st.st_ino, st.st_size

    def poll(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            if st.st_ino != self.inode or st.st_size < self.offset:
                self.inode, self.offset, self.partial = st.st_ino, 0, b""  # rotated or new
            data = os.pread(fd, _MAX_READ, self.offset)
        finally:
            os.close(fd)
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        for line in lines:
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
