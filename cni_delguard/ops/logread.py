"""Reading the decision log for the operator's tools: any file, any bytes, never a traceback.

The log (and its rotated `.1`) is read in bounded chunks; a line that is not a JSON object, not
UTF-8, longer than MAX_LINE or holding NaN or Infinity (which the guard never writes, and which
is not JSON) is counted as malformed and skipped. A path that is not a regular file (a
directory, a FIFO that would block, a device) is refused with one line. The values a tool takes
from a record go through `text` and `error_code` where it reads them: a log is a file anyone
with root may have edited.
"""

from __future__ import annotations

import json
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

# The guard's lines are well under 4 KiB; anything this long is not one of them.
MAX_LINE = 1024 * 1024
_CHUNK = 256 * 1024
# A CNI error code is a uint32 (libcni's types.Error.Code is a uint).
MAX_CODE = 2**32 - 1


def text(value: object) -> str | None:
    """A string field of a record, or None when it is anything else."""
    return value if isinstance(value, str) else None


def error_code(value: object) -> int | None:
    """A CNI error code from a record: an integer from 0 to MAX_CODE, or None (a bool, a float,
    a 400-digit integer that could not even be printed, anything else)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_CODE else None


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


class LogError(Exception):
    """The log cannot be read at all (the one-line message is the exception's text)."""


class Records:
    """Lines to records; `malformed` counts the lines that hold none (a blank line is not one)."""

    def __init__(self) -> None:
        self.malformed = 0

    def record(self, line: bytes | None) -> dict[str, Any] | None:
        """The record of one line; None for a blank or malformed line, or one over MAX_LINE."""
        if line is None:  # over MAX_LINE
            self.malformed += 1
            return None
        if not line.strip():
            return None
        rec = parse(line)
        if rec is None:
            self.malformed += 1
        return rec


class LogReader(Records):
    """Iterate the records of `<path>.1` then `<path>`; `malformed` counts what was skipped."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.files = [name for name in (path + ".1", path) if _present(name)]
        if not self.files:
            raise LogError(f"no log at {path}")
        for name in self.files:
            _check_regular(name)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for name in self.files:
            for line in _lines(name):
                rec = self.record(line)
                if rec is not None:
                    yield rec


def parse(line: bytes) -> dict[str, Any] | None:
    """The record a (non-blank) line holds, or None when it is not a JSON object (NaN and
    Infinity, which are not JSON, make it none)."""
    try:
        rec = json.loads(line, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return None
    return rec if isinstance(rec, dict) else None


def _present(name: str) -> bool:
    try:
        os.stat(name)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise LogError(f"cannot read {name}: {exc.strerror or exc}") from None
    return True


def _check_regular(name: str) -> None:
    st = os.stat(name)
    if stat.S_ISDIR(st.st_mode):
        raise LogError(f"{name} is a directory, not a log file")
    if not stat.S_ISREG(st.st_mode):
        raise LogError(f"{name} is not a regular file")


def _lines(name: str) -> Iterator[bytes | None]:
    """The file's lines without their newline; None for each line over MAX_LINE."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise LogError(f"cannot read {name}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the check
            raise LogError(f"{name} is not a regular file")
        pending = b""
        overlong = False
        while chunk := os.read(fd, _CHUNK):
            parts = (pending + chunk).split(b"\n")
            pending = parts.pop()
            for part in parts:
                yield None if overlong else part
                overlong = False
            if len(pending) > MAX_LINE:
                pending, overlong = b"", True
        if pending or overlong:
            yield None if overlong else pending
    except OSError as exc:
        raise LogError(f"cannot read {name}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
