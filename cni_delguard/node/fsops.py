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
from dataclasses import dataclass

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_CONF = 1024 * 1024  # a CNI conf is a few KiB; refuse to slurp anything huge


class UnsafeFileError(OSError):
    """A path that is a symlink, not a regular file, or too big to be a conf."""


@dataclass(frozen=True)
class FileInfo:
    data: bytes
    mode: int
    uid: int
    gid: int


def read_regular(path: str, limit: int = MAX_CONF) -> FileInfo:
    """Read a regular file without following a symlink at its last component."""
    try:
        fd = os.open(path, _READ)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFileError(exc.errno, "is a symlink", path) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFileError(errno.EINVAL, "not a regular file", path)
        if st.st_size > limit:
            raise UnsafeFileError(errno.EFBIG, f"larger than {limit} bytes", path)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return FileInfo(b"".join(chunks), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
    finally:
        os.close(fd)


def temp_name(path: str, tag: str = "delguard") -> str:
    """A hidden sibling of `path` that no CNI loader picks up (`.tmp` is not a conf extension)."""
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.{tag}-{os.getpid()}.tmp")


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes, mode: int, owner: tuple[int, int] | None = None) -> None:
    """Replace `path` with `data` (mode and owner as given) in one rename."""
    tmp = temp_name(path)
    remove_quietly(tmp)  # left by a crashed run of the same pid; O_EXCL below needs it gone
    fd = os.open(tmp, _CREATE, mode)
    try:
        try:
            os.fchmod(fd, mode)  # the umask must not narrow the mode we keep
            if owner is not None and os.geteuid() == 0:
                os.fchown(fd, *owner)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, path)
    except BaseException:
        remove_quietly(tmp)
        raise
    fsync_dir(os.path.dirname(path) or ".")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def copy_file(src: str, dst: str, mode: int) -> None:
    """Copy a regular file to a new path (created exclusively), fsynced."""
    with open(src, "rb") as fin:
        fd = os.open(dst, _CREATE, mode)
        try:
            os.fchmod(fd, mode)
            while chunk := fin.read(1024 * 1024):
                _write_all(fd, chunk)
            os.fsync(fd)
        finally:
            os.close(fd)


def symlink_atomic(target: str, path: str) -> None:
    """Point the symlink `path` at `target`, replacing whatever is there in one rename."""
    tmp = temp_name(path, "link")
    remove_quietly(tmp)
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
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeFileError(errno.ENOTDIR, "not a directory", path)
    if st.st_mode & 0o022:
        raise UnsafeFileError(errno.EPERM, "writable by group or others", path)
