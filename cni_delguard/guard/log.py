"""The decision log: one JSON line per decision, appended to a file, never to stdout.

stdout is the CNI result. A log that cannot be written never fails the CNI operation: the guard
then says so on stderr, which the runtime records.

`logFile` comes from a config that a NetworkAttachmentDefinition's author may have written
(paths.py), so the guard is careful with what it finds there:
- the path must be under an allowed prefix (paths.py);
- it is opened without following a symlink and without blocking (a FIFO is refused, never
  waited on), and appended to only when it is a regular file with one link, owned by the guard's
  user, not writable by group or others, and empty or starting with a record of the guard's own
  (`{"ts": "`): a foreign file is never appended to, nor rotated;
- a new one is created (0600, whatever the umask) only in a directory owned by the guard's user
  and not writable by others; missing parent dirs are made 0755 (the last one 0750);
- a record is one write() on an O_APPEND descriptor, so records of concurrent plugin processes
  do not interleave; a short write (a full disk) is cut back off, so no half line is left for the
  next record to glue onto;
- past MAX_BYTES the file is renamed to `<logFile>.1` (one previous generation), replacing a
  `.1` only when that passes the same checks.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
import time

from cni_delguard.cni import jsonlite
from cni_delguard.guard import paths

MAX_BYTES = 10 * 1024 * 1024
LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}
# Every record the guard writes starts so: the mark of a file the guard itself wrote.
RECORD_START = b'{"ts": "'
_OPEN = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class RefusedError(OSError):
    """A log path the guard will not write to."""


class Logger:
    __slots__ = ("cni_path", "level", "path")

    def __init__(self, path: str, level: str, cni_path: str = "") -> None:
        self.path = path
        self.level = LEVELS.get(level, LEVELS["info"])
        self.cni_path = cni_path  # where an admin's widened path rule is found (paths.py)

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
            _complain(f"cni-delguard: cannot write log {self.path}: {exc}\n")

    def _append(self, line: bytes) -> None:
        why = paths.refusal("log", self.path, self.cni_path)
        if why is not None:
            raise RefusedError(errno.EPERM, why)
        fd, size = _open(self.path)
        try:
            _write_record(fd, line)
            if size + len(line) > MAX_BYTES:
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
            if current.st_ino != os.fstat(fd).st_ino or current.st_size <= MAX_BYTES:
                return
            if _foreign(self.path + ".1"):
                raise RefusedError(errno.EPERM, f"not rotated: {self.path}.1 is not the guard's")
            os.replace(self.path, self.path + ".1")
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


def _open(path: str) -> tuple[int, int]:
    """A checked descriptor of the log file (created if missing) and its size."""
    try:
        fd = os.open(path, _OPEN)
    except FileNotFoundError:
        return _create(path), 0
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RefusedError(errno.ELOOP, f"{path} is a symlink") from None
        raise
    try:
        return fd, _check(fd, path)
    except BaseException:
        os.close(fd)
        raise


def _check(fd: int, path: str) -> int:
    """The size of an existing log file the guard may append to; RefusedError otherwise."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        raise RefusedError(errno.EPERM, f"{path} is not a regular file with one link")
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise RefusedError(errno.EPERM, f"{path} is not owned by uid {os.geteuid()} or is writable")
    if st.st_size and os.pread(fd, len(RECORD_START), 0) != RECORD_START:
        raise RefusedError(errno.EPERM, f"{path} was not written by cni-delguard")
    return st.st_size


def _create(path: str) -> int:
    from cni_delguard.state import fsutil

    head, name = os.path.split(path)
    try:
        dir_fd = os.open(head, _DIR)
    except FileNotFoundError:
        fsutil.make_dirs(head, 0o750)
        dir_fd = os.open(head, _DIR)
    try:
        st = os.fstat(dir_fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise RefusedError(
                errno.EPERM, f"{head} is not owned by uid {os.geteuid()} or is writable"
            )
        try:
            fd = os.open(name, _OPEN | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
        except FileExistsError:  # another guard was first
            fd, _ = _open(path)
            return fd
        os.fchmod(fd, 0o600)
        return fd
    finally:
        os.close(dir_fd)


def _write_record(fd: int, line: bytes) -> None:
    """One write of the whole record. A short one (ENOSPC part-way) is truncated back off when
    nothing was appended after it, so the file never keeps half a record."""
    written = os.write(fd, line)
    if written == len(line):
        return
    end = os.lseek(fd, 0, os.SEEK_CUR)
    if os.fstat(fd).st_size == end:
        os.ftruncate(fd, end - written)
    raise OSError(errno.ENOSPC, f"short write ({written} of {len(line)} bytes), record dropped")


def _foreign(path: str) -> bool:
    """True when `path` exists and is not a log file of the guard's own."""
    try:
        fd = os.open(path, _OPEN)
    except OSError as exc:
        return not isinstance(exc, FileNotFoundError)  # a FIFO, a symlink ...: not ours
    try:
        _check(fd, path)
    except OSError:
        return True
    else:
        return False
    finally:
        os.close(fd)


def _complain(text: str) -> None:
    """stderr, never stdout; a closed or broken stderr loses the complaint, not the CNI call."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
