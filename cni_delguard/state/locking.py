"""The per-attachment lock: ADD, DEL and CHECK of one attachment never overlap.

The spec forbids a runtime to run two operations for one container at once; this lock guards
against runtimes (and crashes) that break that rule, e.g. a runtime that SIGKILLs the plugin on a
timeout and retries while the delegate still runs. Different attachments use different files and
never wait on each other.

The lock is a flock on `<key>.lock`, opened without following symlinks. The first attempt is one
non-blocking flock: that is the whole cost when the runtime keeps the rule, which is nearly always.
Only when another process holds the lock does filelock do the waiting (bounded, polled), which
keeps its import (~30 ms of start-up: logging, inspect, dataclasses ...) off the common path.

A DEL that leaves nothing behind removes the lock file while it still holds the lock; a waiter
that then wins the flock on the removed inode sees that (st_nlink == 0, or the path names another
inode), lets go and tries again on the new file, so two holders can never both believe they own
the attachment.
"""

from __future__ import annotations

import errno
import fcntl
import os

from cni_delguard.cni import errors
from cni_delguard.state.fsutil import FILE_MODE

_POLL = 0.01


def try_lock(path: str) -> int | None:
    """One attempt: the fd holding the lock on the file now at `path`, or None if it is busy.
    On a read-only file system (ext4 remounts itself so after a disk error) an existing lock
    file is still lockable through a read-only descriptor; a missing one raises
    FileNotFoundError."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    except OSError as exc:
        if exc.errno != errno.EROFS:
            raise
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    held = os.fstat(fd)
    try:
        current = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        current = None
    if held.st_nlink == 0 or current is None or current.st_ino != held.st_ino:
        os.close(fd)  # we locked a file a finished DEL removed: try again on the new one
        return None
    return fd


def _wait(path: str, timeout: float) -> int:
    """Wait (bounded, polled) for the holder to let go, then take the lock with try_lock.

    filelock does the waiting through its public API only: acquire() returns once the flock
    on the file at `path` is free, and we let go at once and make our own no-follow attempt,
    which checks that the locked inode is still the one at `path`. Another waiter may win that
    race; then we wait again, within the same deadline.
    """
    import time

    from filelock import Timeout, UnixFileLock

    deadline = time.monotonic() + timeout
    while True:
        waiter = UnixFileLock(path, mode=FILE_MODE)
        try:
            waiter.acquire(timeout=max(0.0, deadline - time.monotonic()), poll_interval=_POLL)
        except Timeout:
            raise errors.CniError(
                errors.TRY_AGAIN_LATER, f"another operation holds {path} (waited {timeout:g} s)"
            ) from None
        waiter.release(force=True)
        fd = try_lock(path)
        if fd is not None:
            return fd


def _read_only(path: str) -> bool:
    try:
        return bool(os.statvfs(os.path.dirname(path)).f_flag & os.ST_RDONLY)
    except OSError:
        return False


class AttachmentLock:
    """Hold the lock of one attachment; `remove()` drops the file while still holding it."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self._fd: int | None = None
        try:
            self._fd = try_lock(path)
            if self._fd is None:
                self._fd = _wait(path, timeout)
        except FileNotFoundError:
            # Read-only and no lock file: nothing can create one, and no ADD can run (it could
            # not write its marker), so there is nothing to serialize with. Go on unlocked.
            if not _read_only(path):
                raise errors.CniError(errors.IO_FAILURE, f"cannot lock {path}") from None
        except OSError as exc:
            raise errors.CniError(errors.IO_FAILURE, f"cannot lock {path}", str(exc)) from None

    def held_fd(self) -> int:
        if self._fd is None:
            raise RuntimeError("lock not held")
        return self._fd

    def remove(self) -> None:
        """Unlink the lock file while holding it (waiters notice and retry)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno != errno.EROFS:
                raise

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor releases the flock
            self._fd = None

    def __enter__(self) -> AttachmentLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
