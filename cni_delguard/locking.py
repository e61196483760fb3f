"""The per-attachment lock: ADD, DEL and CHECK of one attachment never overlap.

The spec forbids a runtime to run two operations for one container at once; this lock guards
against runtimes (and crashes) that break that rule, e.g. a runtime that SIGKILLs the plugin on a
timeout and retries while the delegate still runs. Different attachments use different files and
never wait on each other.

filelock provides the waiting (bounded, polled); this module only changes how the lock file is
opened: without following symlinks, and tolerant of the file being removed. A DEL that leaves
nothing behind removes the lock file while it still holds the lock; a waiter that then wins the
flock on the removed inode sees that (st_nlink == 0, or the path names another inode), lets go and
tries again on the new file, so two holders can never both believe they own the attachment.
"""

from __future__ import annotations

import fcntl
import os

from filelock import Timeout, UnixFileLock

from cni_delguard import errors
from cni_delguard.fsutil import FILE_MODE

_POLL = 0.01


class _NoFollowLock(UnixFileLock):
    def _acquire(self) -> None:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.lock_file, flags, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return
        held = os.fstat(fd)
        try:
            current = os.stat(self.lock_file, follow_symlinks=False)
        except FileNotFoundError:
            current = None
        if held.st_nlink == 0 or current is None or current.st_ino != held.st_ino:
            os.close(fd)  # we locked a file a finished DEL removed: try again on the new one
            return
        self._context.lock_file_fd = fd


class AttachmentLock:
    """Hold the lock of one attachment; `remove()` drops the file while still holding it."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self._lock = _NoFollowLock(path)
        try:
            self._lock.acquire(timeout=timeout, poll_interval=_POLL)
        except Timeout:
            raise errors.CniError(
                errors.TRY_AGAIN_LATER,
                f"another operation holds {path} (waited {timeout:g} s)",
            ) from None
        except OSError as exc:
            raise errors.CniError(errors.IO_FAILURE, f"cannot lock {path}", str(exc)) from None

    def remove(self) -> None:
        """Unlink the lock file while holding it (waiters notice and retry)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def release(self) -> None:
        self._lock.release(force=True)

    def __enter__(self) -> AttachmentLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
