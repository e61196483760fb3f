"""Safe file primitives for the state dir: no symlink is followed, nothing is half-written.

Directories are opened with O_NOFOLLOW and worked on through their descriptors (openat-style
dir_fd calls), so a symlink planted in a path cannot redirect a write. Files are written to an
exclusive temp name, fsynced, renamed into place and the directory fsynced: a reader sees the old
content or the new one, never a torn write, even across a crash (host-local's disk store and
containerd's checkpoints do the same).
"""

from __future__ import annotations

import errno
import os
import stat

from cni_delguard.cni import errors

TYPE_CHECKING = False

DIR_MODE = 0o700
FILE_MODE = 0o600
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_SMALL = 64 * 1024


class UnsafeDirError(errors.CniError):
    def __init__(self, path: str, why: str) -> None:
        super().__init__(errors.IO_FAILURE, f"state dir {path} is unusable: {why}")


def sha256_hex(data: bytes) -> str:
    """hashlib.sha256(data).hexdigest() without loading OpenSSL (~3 ms per exec): CPython's own
    _sha256 (_sha2 from 3.12) computes the same digest."""
    if TYPE_CHECKING:
        from hashlib import sha256
    else:
        try:
            from _sha256 import sha256
        except ImportError:  # pragma: no cover - other Python versions
            try:
                from _sha2 import sha256
            except ImportError:
                from hashlib import sha256
    return str(sha256(data).hexdigest())


def check_dir_fd(fd: int, path: str) -> None:
    """Refuse a directory we do not own or that others can write into."""
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirError(path, "not a directory")
    if st.st_uid != os.geteuid():
        raise UnsafeDirError(path, f"owned by uid {st.st_uid}, not {os.geteuid()}")
    if st.st_mode & 0o022:
        raise UnsafeDirError(path, f"writable by group or others (mode {st.st_mode & 0o7777:o})")


def _open_checked(name: str, path: str, dir_fd: int | None = None) -> int:
    """Open a directory without following a final symlink, then check who may write it."""
    try:
        fd = os.open(name, _OPEN_DIR, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeDirError(path, "a symlink or not a directory") from None
        raise
    try:
        check_dir_fd(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir(path: str, create: bool = False) -> int:
    """Open `path` as a directory fd without following a final symlink; create it if asked."""
    try:
        return _open_checked(path, path)
    except FileNotFoundError:
        if not create:
            raise
    parent, _ = os.path.split(path.rstrip("/"))
    if parent and not os.path.isdir(parent):
        os.makedirs(parent, mode=0o755, exist_ok=True)
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        pass
    return _open_checked(path, path)


def open_subdir(parent_fd: int, name: str, path: str, create: bool = True) -> int:
    """Open (and create) the directory `name` inside an already-checked directory fd."""
    if create:
        try:
            os.mkdir(name, DIR_MODE, dir_fd=parent_fd)
        except FileExistsError:
            pass
    return _open_checked(name, path, parent_fd)


def read_at(dir_fd: int | None, name: str, limit: int = MAX_SMALL) -> bytes | None:
    """A small regular file's bytes, or None when it is missing (or not a regular file).
    With dir_fd None, `name` is a path."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd
        )
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            return None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit)
    finally:
        os.close(fd)


def read_small(dir_path: str, name: str) -> bytes | None:
    """read_at on a path; None when the directory is missing or unsafe."""
    try:
        fd = open_dir(dir_path)
    except (OSError, errors.CniError):
        return None
    try:
        return read_at(fd, name)
    finally:
        os.close(fd)


def write_atomic(dir_fd: int, name: str, data: bytes, durable: bool = True) -> None:
    """Replace `name` in `dir_fd` with `data`: temp file, fsync, rename, fsync dir. Without
    `durable` the fsyncs are skipped: still atomic for readers and across a killed process,
    only a power loss may lose the write (or leave a torn file, which readers treat as such)."""
    tmp = f".{name}.{os.getpid()}.tmp"
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        FILE_MODE,
        dir_fd=dir_fd,
    )
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        unlink_at(dir_fd, tmp)
        raise
    if durable:
        os.fsync(dir_fd)


def unlink_at(dir_fd: int, name: str) -> bool:
    """Remove `name` (never following it); False when it was already gone."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


def write_best_effort(dir_path: str, name: str, data: bytes) -> None:
    """A cache write that may fail without consequence (e.g. a read-only state dir)."""
    try:
        parent_fd = open_dir(os.path.dirname(dir_path), create=True)
        try:
            fd = open_subdir(parent_fd, os.path.basename(dir_path), dir_path)
        finally:
            os.close(parent_fd)
        try:
            write_atomic(fd, name, data)
        finally:
            os.close(fd)
    except (OSError, errors.CniError):
        return


def prune_oldest(dir_path: str, keep: int) -> None:
    """Keep only the `keep` most recently modified regular files in a cache directory."""
    try:
        fd = open_dir(dir_path)
    except (OSError, errors.CniError):
        return
    try:
        entries = []
        for name in os.listdir(fd):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            entries.append((st.st_mtime_ns, name))
        entries.sort(reverse=True)
        for _, name in entries[keep:]:
            unlink_at(fd, name)
    finally:
        os.close(fd)
