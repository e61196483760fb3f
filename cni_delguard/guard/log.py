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
  not writable by others (a sticky one such as /tmp only above); a missing one is made (0750)
  only when paths.creatable allows it (the default log's dir, or a leaf in a place the admin
  named), never a missing parent; a new file is created (0600, whatever the umask) through that
  dir's fd, and the rotation renames within it;
- a path refused by the rule or the walk is never written; with a `fallback` (DEL's: the default
  log) the record goes there, with `logFileRefused` saying what was refused and why;
- a record is bounded: a text longer than MAX_TEXT characters (a delegate's error message, for
  one) is cut, its full length noted in it, and a record still over MAX_RECORD bytes keeps only
  the fields that say which attachment and decision it was; each network is held to its budget
  (logbudget.py): past it, its records keep their decision and reason but lose every text a
  delegate chose, so that one network's delegate cannot rotate the others' records away;
- what goes to stderr (the runtime's journal) is escaped as the log's JSON is: a path or reason
  a config chose cannot forge a line there;
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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_BYTES = 10 * 1024 * 1024
# Real records are 300 to 800 bytes; a delegate's error message is its longest text.
MAX_TEXT = 2000
MAX_RECORD = 16 * 1024
# What a record over MAX_RECORD keeps.
_ESSENTIAL = ("ts", "level", "command", "containerID", "ifname", "network", "pod", "decision")
# What a record of a network past its log budget keeps (logbudget.py): which attachment, the
# decision and its reason (the guard's own words, cut short), the error's code, not its text.
_SHORT = (*_ESSENTIAL, "evidence", "mode", "durationMs")
_SHORT_REASON = 200
LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}
# Every record the guard writes starts so: the mark of a file the guard itself wrote.
RECORD_START = b'{"ts": "'
_OPEN = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class RefusedError(OSError):
    """A log path the guard will not write to."""


class PathRefusedError(RefusedError):
    """A log path outside the allowed places, or through a link or a dir others can write."""


class Logger:
    __slots__ = ("builtin", "cni_path", "fallback", "level", "path")

    def __init__(
        self, path: str, level: str, cni_path: str = "", fallback: str = "", builtin: str = ""
    ) -> None:
        self.path = path
        self.level = LEVELS.get(level, LEVELS["info"])
        self.cni_path = cni_path  # where an admin's widened path rule is found (paths.py)
        # Where a record goes when `path` is refused by the path rule (DEL: the default log,
        # so that a DEL that succeeds is still logged). "": nowhere.
        self.fallback = fallback
        # The guard's own default log (guard/defaults.py, or a test's): its dir is one the
        # guard may create (paths.creatable).
        from cni_delguard.guard import defaults

        self.builtin = builtin or defaults.LOG_FILE

    def event(self, level: str, **fields: object) -> None:
        if not self.path or LEVELS[level] < self.level:
            return
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z"
        record: dict[str, object] = {"ts": stamp, "level": level}
        record.update(fields)
        try:
            self._append(self.path, record)
        except PathRefusedError as exc:
            _complain(f"cannot write log {self.path}: {exc}")
            if not self.fallback or self.fallback == self.path:
                return
            record["logFileRefused"] = {"logFile": self.path, "reason": str(exc)}
            try:
                self._append(self.fallback, record)
            except OSError as also:
                _complain(f"cannot write log {self.fallback}: {also}")
        except OSError as exc:
            _complain(f"cannot write log {self.path}: {exc}")

    def _append(self, path: str, record: dict[str, object]) -> None:
        why = paths.refusal("log", path, self.cni_path)
        if why is not None:
            raise PathRefusedError(errno.EPERM, why)
        head, name = os.path.split(path)
        dir_fd = self._log_dir(head)
        try:
            fd, size = _open(dir_fd, name, path)  # refused: nothing is made beside it
            try:
                line = self._charged(dir_fd, name, record)
                _write_record(fd, line)
                if size + len(line) > MAX_BYTES:
                    _rotate(dir_fd, name, fd)
            finally:
                os.close(fd)
        finally:
            os.close(dir_fd)

    @staticmethod
    def _charged(dir_fd: int, name: str, record: dict[str, object]) -> bytes:
        """The record's line as its network's budget allows it (logbudget.py): whole, or past
        the budget its short form (every decision stays logged, with its reason; the texts a
        delegate chose go), the first one after the budget's note."""
        from cni_delguard.guard import logbudget

        line = _line(record)
        charge = logbudget.charge(dir_fd, name, record.get("network"), len(line), time.time())
        if charge.action == logbudget.WRITE and not charge.dropped:
            return line
        if charge.action != logbudget.WRITE:
            record = _short(record)
        if charge.dropped:
            record = dict(record, logShortened=charge.dropped)
        line = _line(record)
        if charge.action == logbudget.NOTE:
            line = _line(_budget_note(record, charge.window_start)) + line
        return line

    def _log_dir(self, head: str) -> int:
        """The log's dir, walked (fsutil.walk: no link, each dir ours and not writable by
        others); made (0750) when missing only where paths.creatable allows, as a leaf."""
        from cni_delguard.state import fsutil

        try:
            try:
                return fsutil.walk(head)
            except FileNotFoundError:
                builtin = os.path.dirname(self.builtin)
                if not paths.creatable("log", head, self.cni_path, builtin):
                    raise PathRefusedError(
                        errno.ENOENT,
                        f"log dir {head} does not exist, and the guard creates only its own "
                        "default one or a leaf in a place the admin named",
                    ) from None
                return fsutil.walk(head, create=True, mode=0o750)
        except fsutil.UnsafeDirError as exc:
            raise PathRefusedError(errno.EPERM, f"log dir {exc.path}: {exc.why}") from None


def _line(record: dict[str, object]) -> bytes:
    """The record as one JSON line, bounded (MAX_TEXT per text, MAX_RECORD in all)."""
    bounded = _bounded(record, 0)
    line = (jsonlite.dumps(bounded, default_str=True) + "\n").encode("utf-8", "surrogateescape")
    if len(line) <= MAX_RECORD:
        return line
    kept: dict[str, object] = {k: bounded[k] for k in _ESSENTIAL if k in bounded}
    kept["recordCut"] = len(line)
    return (jsonlite.dumps(kept, default_str=True) + "\n").encode("utf-8", "surrogateescape")


def _bounded(value: Any, depth: int) -> Any:
    """`value` with every text over MAX_TEXT characters cut, its full length noted in it."""
    if isinstance(value, str):
        if len(value) <= MAX_TEXT:
            return value
        return f"{value[:MAX_TEXT]}... [cut: {len(value)} characters]"
    if depth > 8:  # the guard's records are 3 levels deep at most
        return "[nested too deep]" if isinstance(value, (dict, list, tuple)) else value
    if isinstance(value, dict):
        return {k: _bounded(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_bounded(v, depth + 1) for v in value]
    return value


def _short(record: dict[str, object]) -> dict[str, object]:
    """A record's short form, for a network past its budget: at most a few hundred bytes."""
    short: dict[str, object] = {k: record[k] for k in _SHORT if k in record}
    reason = record.get("reason")
    if isinstance(reason, str):
        short["reason"] = reason if len(reason) <= _SHORT_REASON else reason[:_SHORT_REASON] + "..."
    error = record.get("error")
    if isinstance(error, dict) and "code" in error:
        short["error"] = {"code": error["code"]}
    short["overBudget"] = True
    return short


def _budget_note(record: dict[str, object], window_start: int) -> dict[str, object]:
    """What stands for a network's records once it is over its budget (logbudget.py)."""
    from cni_delguard.guard import logbudget

    note: dict[str, object] = {k: record[k] for k in ("ts", "command", "network") if k in record}
    note["level"] = "warning"
    note["decision"] = "log-budget"
    note["reason"] = (
        f"this network wrote more than {logbudget.BUDGET} bytes of records in the "
        f"{logbudget.WINDOW} s from {window_start}: its further records in that window are "
        "written in short form (overBudget: the decision and its reason, no delegate text), "
        "and counted in its next whole record (logShortened)"
    )
    return note


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
    """One line on stderr, never stdout, escaped as the log's JSON strings are (control
    characters, ESC, newlines, bidi marks and every other non-ASCII character as \\uXXXX): the
    runtime puts it in its journal, and a path a config chose must not forge lines there. A
    closed or broken stderr loses the complaint, not the CNI call."""
    escaped = jsonlite.dumps(text)[1:-1]
    try:
        sys.stderr.write(f"cni-delguard: {escaped}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
