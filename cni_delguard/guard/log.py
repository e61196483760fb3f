"""The decision log: one JSON line per decision, appended to a file, never to stdout.

stdout is the CNI result. Each line is written with a single write() on an O_APPEND descriptor, so
lines from concurrent plugin processes do not interleave. The file is rotated once it passes
MAX_BYTES (one previous generation, `<logFile>.1`). A log that cannot be written never fails the
CNI operation: the guard then says so once on stderr, which the runtime records.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time

from cni_delguard.cni import jsonlite

MAX_BYTES = 10 * 1024 * 1024
LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


class Logger:
    __slots__ = ("level", "path")

    def __init__(self, path: str, level: str) -> None:
        self.path = path
        self.level = LEVELS.get(level, LEVELS["info"])

    def event(self, level: str, **fields: object) -> None:
        if not self.path or LEVELS[level] < self.level:
            return
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z"
        record: dict[str, object] = {"ts": stamp, "level": level}
        record.update(fields)
        line = (jsonlite.dumps(record, default_str=True) + "\n").encode("utf-8", "surrogateescape")
        try:
            self._append(line)
        except OSError as exc:
            sys.stderr.write(f"cni-delguard: cannot write log {self.path}: {exc}\n")

    def _append(self, line: bytes) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags, 0o600)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(self.path), mode=0o750, exist_ok=True)
            fd = os.open(self.path, flags, 0o600)
        try:
            os.write(fd, line)
            if os.fstat(fd).st_size > MAX_BYTES:
                self._rotate(fd)
        finally:
            os.close(fd)

    def _rotate(self, fd: int) -> None:
        """Only the process that gets the flock rotates, and only if the file is still ours."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        try:
            current = os.stat(self.path, follow_symlinks=False)
            if current.st_ino == os.fstat(fd).st_ino and current.st_size > MAX_BYTES:
                os.replace(self.path, self.path + ".1")
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
