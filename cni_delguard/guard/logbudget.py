"""A bound per network on the decision log: what one network writes cannot rotate the others'
records away.

The log is shared: every network whose config names the same `logFile` (the default one, most
often) appends to it, and it keeps one previous generation past log.MAX_BYTES. A network's
author chooses what its delegate prints (its error message is logged) and how often its pods
fail, so without a bound one network could rotate every other network's records out of both
generations in minutes, and with them the history doctor reads to find DELs that keep failing.

Each network may append BUDGET bytes of records per WINDOW seconds (a fixed window, as
journald's per-service rate limit). Past it, one `log-budget` record says so, and the network's
further records in that window are written in their short form (log.py: the attachment, the
decision and its reason, the error's code; never dropped, since every DEL decision is logged)
and counted; the count goes into its first whole record of a later window (`logShortened`).
The tally is one small file per network in a dir beside the log, `.<log name>.budget/` (0700,
reached through the log dir's descriptor, nothing followed), updated under a flock. At BUDGET
bytes a minute of whole records, a delegate's texts take one network 40 minutes to rotate 10 MiB;
past it a record is a few hundred bytes whatever the delegate printed, so what one network can
still write is bounded by how many calls its pods make (about 35,000 records to rotate the log),
not by its text. A busy network's legitimate pace (a drain of 100 pods a minute, three records
each of about 500 bytes) is well under the budget; a storm of stale DELs goes past it and keeps
every decision in short form.

When the tally cannot be kept (a full or read-only fs) the record is written as if there were
none: the log is best effort, the bound too.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat

from cni_delguard.cni.skel import valid_network

WINDOW = 60
BUDGET = 256 * 1024
WRITE = "write"
NOTE = "note"
DROP = "drop"
# Records whose network is unknown (a DEL whose config could not be read) share one tally; no
# network name starts with "_".
UNNAMED = "_unnamed"
_OPEN = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Charge:
    """What to do with a record (WRITE; NOTE: the budget's note, then its short form; DROP: its
    short form), and how many records of this network an earlier window shortened (to report
    once)."""

    __slots__ = ("action", "dropped", "window_start")

    def __init__(self, action: str, dropped: int = 0, window_start: int = 0) -> None:
        self.action, self.dropped, self.window_start = action, dropped, window_start


def tally_name(network: object) -> str:
    return network if isinstance(network, str) and valid_network(network) else UNNAMED


def charge(dir_fd: int, log_name: str, network: object, size: int, now: float) -> Charge:
    """Count a record of `size` bytes against its network's budget in the log's dir."""
    try:
        fd = _open_tally(dir_fd, log_name, tally_name(network))
    except OSError:
        return Charge(WRITE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        window = int(now // WINDOW)
        seen, used, dropped, noted = _parse(os.pread(fd, 64, 0))
        carried = 0
        if seen != window:
            carried, used, dropped, noted = dropped, 0, 0, 0
        if used + size <= BUDGET:
            used += size
            result = Charge(WRITE, carried)
        elif not noted:
            noted = 1
            result = Charge(NOTE, carried, window * WINDOW)
        else:
            dropped += 1
            result = Charge(DROP)
        body = f"{window} {used} {dropped} {noted}\n".encode()
        os.pwrite(fd, body.ljust(64), 0)
    except OSError:
        return Charge(WRITE)
    finally:
        os.close(fd)
    return result


def _parse(data: bytes) -> tuple[int, int, int, int]:
    try:
        window, used, dropped, noted = (int(x) for x in data.split())
    except ValueError:
        return -1, 0, 0, 0
    return window, used, dropped, noted


def _open_tally(dir_fd: int, log_name: str, name: str) -> int:
    """The tally file `name` in `.<log name>.budget/`, both made if missing, neither followed,
    the dir ours and 0700, the file ours and regular."""
    budget_dir = f".{log_name}.budget"
    try:
        os.mkdir(budget_dir, 0o700, dir_fd=dir_fd)
    except FileExistsError:
        pass
    dfd = os.open(budget_dir, _DIR, dir_fd=dir_fd)
    try:
        st = os.fstat(dfd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise OSError(errno.EPERM, "budget dir not the guard's own")
        fd = os.open(name, _OPEN, 0o600, dir_fd=dfd)
    finally:
        os.close(dfd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
        os.close(fd)
        raise OSError(errno.EPERM, "tally not the guard's own")
    return fd
