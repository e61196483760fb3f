"""File primitives for shared node directories (/opt/cni/bin, /etc/cni/net.d).

Every write goes to an exclusive hidden temp name in the same directory, is fsynced, renamed over
the target and the directory fsynced: a runtime reading the conf dir or exec'ing from the bin dir
sees the old file or the new one, never a torn one. Temp names end in `.tmp`, an extension libcni
never loads, so a temp file can never become the conf the runtime (or multus) picks. Reads use
O_NOFOLLOW: a symlink where a regular file is expected is refused, not followed.
"""

from __future__ import annotations

import errno
import os
import stat

from cni_delguard.state import fsutil

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_CONF = 1024 * 1024  # a CNI conf is a few KiB; refuse to slurp anything huge


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_file(src: str, dst: str, mode: int) -> None:
    """Copy a regular file to a new path (created exclusively), fsynced."""
    with open(src, "rb") as fin:
        fd = os.open(dst, _CREATE, mode)
        try:
            os.fchmod(fd, mode)
            while chunk := fin.read(1024 * 1024):
                fsutil.write_all(fd, chunk)
            os.fsync(fd)
        finally:
            os.close(fd)


def symlink_atomic(target: str, path: str) -> None:
    """Point the symlink `path` at `target`, replacing whatever is there in one rename."""
    head, tail = os.path.split(path)
    tmp = os.path.join(head, fsutil.temp_name(tail))
    os.symlink(target, tmp)
    try:
        os.rename(tmp, path)
    except BaseException:
        remove_quietly(tmp)
        raise
    fsync_dir(os.path.dirname(path) or ".")


def remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def makedirs_private(path: str) -> None:
    """Create `path` (0700) and refuse it if it is a symlink or writable by others."""
    fsutil.make_dirs(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise fsutil.UnsafeFileError(errno.ENOTDIR, "not a directory", path)
    if st.st_mode & 0o022:
        raise fsutil.UnsafeFileError(errno.EPERM, "writable by group or others", path)
