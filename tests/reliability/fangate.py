"""Hold a process inside open() or execve() of a file in one directory: fanotify permission events.

This is how the crash tests stop the guard at an exact instant without touching the product: the
kernel asks us before the guard may open its temp file (which already exists then, empty), its lock
file or its log, or before its forked child may exec the delegate. While we hold the answer the
process sleeps killably in the kernel, so a SIGKILL lands precisely there. Every other event is
allowed at once; closing the fanotify descriptor allows whatever is still pending.

Needs CAP_SYS_ADMIN (root) and a kernel with FAN_OPEN_EXEC_PERM (5.0+).
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
import threading
from collections.abc import Callable
from pathlib import Path

FAN_CLOEXEC = 0x1
FAN_CLASS_CONTENT = 0x4
FAN_OPEN_PERM = 0x10000
FAN_OPEN_EXEC_PERM = 0x40000
FAN_EVENT_ON_CHILD = 0x08000000
FAN_MARK_ADD = 0x1
FAN_ALLOW = 0x1
AT_FDCWD = -100
_META = struct.Struct("IBBHQii")  # struct fanotify_event_metadata
_RESPONSE = struct.Struct("iI")  # struct fanotify_response

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                                ctypes.c_char_p]


def available() -> str | None:
    """None when permission events can be used here, else why not."""
    if os.geteuid() != 0:
        return "fanotify permission events need root"
    fd = _libc.fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, os.O_RDONLY)
    if fd < 0:
        return f"fanotify_init failed: {os.strerror(ctypes.get_errno())}"
    os.close(fd)
    return None


class FanGate:
    """Hold the `nth` open (or exec) in `directory` whose path satisfies `match`."""

    def __init__(self, directory: Path, match: Callable[[str], bool], nth: int = 1,
                 exec_only: bool = False) -> None:
        self.match = match
        self.nth = nth
        self.seen = 0
        self.held: tuple[int, int, str] | None = None  # (event fd, pid, path)
        self.hit = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.fd = _libc.fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, os.O_RDONLY)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "fanotify_init")
        mask = (FAN_OPEN_EXEC_PERM if exec_only else FAN_OPEN_PERM) | FAN_EVENT_ON_CHILD
        if _libc.fanotify_mark(self.fd, FAN_MARK_ADD, mask, AT_FDCWD, str(directory).encode()):
            err = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(err, f"fanotify_mark {directory}")
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _answer(self, event_fd: int) -> None:
        try:
            os.write(self.fd, _RESPONSE.pack(event_fd, FAN_ALLOW))
        except OSError:
            pass  # the process died while we held it: nothing left to answer
        os.close(event_fd)

    def _loop(self) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        while not self._stop.is_set():
            if not poller.poll(50):
                continue
            buf = os.read(self.fd, 8192)
            offset = 0
            while offset + _META.size <= len(buf):
                length, _, _, _, _, event_fd, pid = _META.unpack_from(buf, offset)
                offset += length
                self._event(event_fd, pid)

    def _event(self, event_fd: int, pid: int) -> None:
        try:
            path = os.readlink(f"/proc/self/fd/{event_fd}")
        except OSError:
            path = ""
        with self._lock:
            if self.held is None and not self.hit.is_set() and self.match(path):
                self.seen += 1
                if self.seen == self.nth:
                    self.held = (event_fd, pid, path)
                    self.hit.set()
                    return
        self._answer(event_fd)

    def wait(self, timeout: float = 30) -> tuple[int, str]:
        """(pid, path) of the held process, once it is held."""
        if not self.hit.wait(timeout):
            raise AssertionError(f"fanotify gate: no matching open within {timeout}s")
        assert self.held is not None
        return self.held[1], self.held[2]

    def release(self) -> None:
        with self._lock:
            if self.held is not None:
                self._answer(self.held[0])
                self.held = None

    def close(self) -> None:
        self.release()
        self._stop.set()
        self._thread.join(5)
        os.close(self.fd)

    def __enter__(self) -> FanGate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
