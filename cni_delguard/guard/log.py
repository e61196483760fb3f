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
- its dir is reached by fsutil.walk: no component a link, each directory the guard's user's and
  not writable by others (a sticky one such as /tmp only above); missing ones are made 0755
  (the last one 0750); a new file is created (0600, whatever the umask) through that dir's fd,
  and the rotation renames within it;
- a path refused by the rule or the walk is never written; with a `fallback` (DEL's: the default
  log) the record goes there, with `logFileRefused` saying what was refused and why;
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


class RefusedError(OSError):
    """A log path the guard will not write to."""


class PathRefusedError(RefusedError):
    """A log path outside the allowed places, or through a link or a dir others can write."""


class Logger:
    __slots__ = ("cni_path", "fallback", "level", "path")

    def __init__(self, path: str, level: str, cni_path: str = "", fallback: str = "") -> None:
        self.path = path
        self.level = LEVELS.get(level, LEVELS["info"])
        self.cni_path = cni_path  # where an admin's widened path rule is found (paths.py)
        # Where a record goes when `path` is refused by the path rule (DEL: the default log,
        # so that a DEL that succeeds is still logged; issue 38). "": nowhere.
        self.fallback = fallback

    def event(self, level: str, **fields: object) -> None:
        if not self.path or LEVELS[level] < self.level:
            return
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z"
        record: dict[str, object] = {"ts": stamp, "level": level}
        record.update(fields)
        try:
            self._append(self.path, _line(record))
        except PathRefusedError as exc:
            _complain(f"cni-delguard: cannot write log {self.path}: {exc}\n")
            if not self.fallback or self.fallback == self.path:
                return
            record["logFileRefused"] = {"logFile": self.path, "reason": str(exc)}
            try:
                self._append(self.fallback, _line(record))
            except OSError as also:
                _complain(f"cni-delguard: cannot write log {self.fallback}: {also}\n")
        except OSError as exc:
            _complain(f"cni-delguard: cannot write log {self.path}: {exc}\n")

    def _append(self, path: str, line: bytes) -> None:
        why = paths.refusal("log", path, self.cni_path)
        if why is not None:
            raise PathRefusedError(errno.EPERM, why)
        head, name = os.path.split(path)
        dir_fd = _log_dir(head)
        try:
            fd, size = _open(dir_fd, name, path)
            try:
                _write_record(fd, line)
                if size + len(line) > MAX_BYTES:
                    _rotate(dir_fd, name, fd)
            finally:
                os.close(fd)
        finally:
            os.close(dir_fd)


def _line(record: dict[str, object]) -> bytes:
    return (jsonlite.dumps(record, default_str=True) + "\n").encode("utf-8", "surrogateescape")


def _log_dir(head: str) -> int:
    """The log's dir, walked (fsutil.walk: no link, each dir ours and not writable by others),
    made if missing: 0755 parents, 0750 itself."""
    from cni_delguard.state import fsutil

    try:
        return fsutil.walk(head, create=True, mode=0o750)
    except fsutil.UnsafeDirError as exc:
        raise PathRefusedError(errno.EPERM, f"log dir {exc.path}: {exc.why}") from None


def _rotate(dir_fd: int, name: str, fd: int) -> None:
    """Only the process that gets the flock rotates, and only if the file is still ours."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return
    try:
        current = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if current.st_ino != os.fstat(fd).st_ino or current.st_size <= MAX_BYTES:
            return
        if _foreign(dir_fd, name + ".1"):
            raise RefusedError(errno.EPERM, f"not rotated: {name}.1 is not the guard's")
        os.replace(name, name + ".1", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _open(dir_fd: int, name: str, path: str) -> tuple[int, int]:
    """A checked descriptor of the log file (created if missing) and its size."""
    try:
        fd = os.open(name, _OPEN, dir_fd=dir_fd)
    except FileNotFoundError:
        return _create(dir_fd, name, path), 0
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


def _create(dir_fd: int, name: str, path: str) -> int:
    """A new log file (0600 whatever the umask) in its walked dir."""
    try:
        fd = os.open(name, _OPEN | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
    except FileExistsError:  # another guard was first
        fd, _ = _open(dir_fd, name, path)
        return fd
    os.fchmod(fd, 0o600)
    return fd


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


def _foreign(dir_fd: int, name: str) -> bool:
    """True when `name` exists and is not a log file of the guard's own."""
    try:
        fd = os.open(name, _OPEN, dir_fd=dir_fd)
    except OSError as exc:
        return not isinstance(exc, FileNotFoundError)  # a FIFO, a symlink ...: not ours
    try:
        _check(fd, name)
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
