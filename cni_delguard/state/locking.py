"""The per-attachment lock: ADD, DEL and CHECK of one attachment never overlap.

The spec forbids a runtime to run two operations for one container at once; this lock guards
against runtimes (and crashes) that break that rule, e.g. a runtime that SIGKILLs the plugin on a
timeout and retries while the delegate still runs. Different attachments use different files and
never wait on each other.

The lock is a flock on `<key>.lock` in the network dir. It is opened, checked and unlinked by
its name relative to that dir's descriptor (the one the marker store walked, or one this module
walks itself), never by a full path: a component swapped for a link while the delegate runs
cannot move what the guard locks or removes. The first attempt is one non-blocking flock: that
is the whole cost when the runtime keeps the rule, which is nearly always; otherwise the attempt
is repeated every _POLL seconds until the deadline.

A DEL that leaves nothing behind removes the lock file while it still holds the lock; a waiter
that then wins the flock on the removed inode sees that (st_nlink == 0, or the name now names
another inode), lets go and tries again on the new file, so two holders can never both believe
they own the attachment.
"""

from __future__ import annotations

import errno
import fcntl
import os

from cni_delguard.cni import errors
from cni_delguard.state import fsutil
from cni_delguard.state.fsutil import FILE_MODE

_POLL = 0.01


def try_lock(dir_fd: int, name: str) -> int | None:
    """One attempt: the fd holding the lock on the file now named `name` in `dir_fd`, or None
    if it is busy. On a read-only file system (ext4 remounts itself so after a disk error) an
    existing lock file is still lockable through a read-only descriptor; a missing one raises
    FileNotFoundError."""
    try:
        fd = os.open(
            name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE, dir_fd=dir_fd
        )
    except OSError as exc:
        if exc.errno != errno.EROFS:
            raise
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    held = os.fstat(fd)
    try:
        current = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        current = None
    if held.st_nlink == 0 or current is None or current.st_ino != held.st_ino:
        os.close(fd)  # we locked a file a finished DEL removed: try again on the new one
        return None
    return fd


def _wait(dir_fd: int, name: str, path: str, timeout: float) -> int:
    """Try again every _POLL seconds until the holder lets go, within `timeout` (code 11)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        fd = try_lock(dir_fd, name)
        if fd is not None:
            return fd
        if time.monotonic() >= deadline:
            raise errors.CniError(
                errors.TRY_AGAIN_LATER, f"another operation holds {path} (waited {timeout:g} s)"
            )
        time.sleep(_POLL)


def _read_only(dir_fd: int) -> bool:
    try:
        return bool(os.fstatvfs(dir_fd).f_flag & os.ST_RDONLY)
    except OSError:
        return False


class AttachmentLock:
    """Hold the lock of one attachment; `remove()` drops the file while still holding it.

    `path` names the lock (in messages; and, without `dir_fd`, where to walk to: its dir is
    opened by fsutil.walk and kept until release). With `dir_fd` (the marker store's network
    dir, borrowed: the caller keeps it open longer than the lock) only `path`'s last component
    is used, relative to it."""

    def __init__(self, path: str, timeout: float, *, dir_fd: int | None = None) -> None:
        self.path = path
        self._name = os.path.basename(path)
        self._fd: int | None = None
        self._own_dir: int | None = None
        try:
            if dir_fd is None:
                dir_fd = self._own_dir = fsutil.walk(os.path.dirname(path))
            self._dir = dir_fd
            self._fd = try_lock(dir_fd, self._name)
            if self._fd is None:
                self._fd = _wait(dir_fd, self._name, path, timeout)
        except FileNotFoundError:
            # Read-only and no lock file: nothing can create one, and no ADD can run (it could
            # not write its marker), so there is nothing to serialize with. Go on unlocked.
            if dir_fd is not None and _read_only(dir_fd):
                return
            self._close_dir()
            raise errors.CniError(errors.IO_FAILURE, f"cannot lock {path}") from None
        except errors.CniError:
            self._close_dir()
            raise
        except OSError as exc:
            self._close_dir()
            raise errors.CniError(errors.IO_FAILURE, f"cannot lock {path}", str(exc)) from None

    def held_fd(self) -> int:
        if self._fd is None:
            raise RuntimeError("lock not held")
        return self._fd

    def remove(self) -> None:
        """Unlink the lock file, by name in its dir, while holding it (waiters notice and
        retry)."""
        try:
            os.unlink(self._name, dir_fd=self._dir)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno != errno.EROFS:
                raise

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor releases the flock
            self._fd = None
        self._close_dir()

    def _close_dir(self) -> None:
        if self._own_dir is not None:
            os.close(self._own_dir)
            self._own_dir = None

    def __enter__(self) -> AttachmentLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
