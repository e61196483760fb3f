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
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    class Hash(Protocol):
        def update(self, data: bytes, /) -> None: ...
        def hexdigest(self) -> str: ...


DIR_MODE = 0o700
FILE_MODE = 0o600
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO planted where a file is expected must not hang the plugin.
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_CREATE_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_SMALL = 64 * 1024


class UnsafeDirError(errors.CniError):
    def __init__(self, path: str, why: str) -> None:
        super().__init__(errors.IO_FAILURE, f"state dir {path} is unusable: {why}")
        self.path, self.why = path, why


def sha256(data: bytes = b"") -> Hash:
    """The one digest: a sha256 hash object, from CPython's own _sha256 (_sha2 from 3.12)
    rather than hashlib, which loads OpenSSL (~3 ms of every exec)."""
    if TYPE_CHECKING:
        from hashlib import sha256 as new
    else:
        try:
            from _sha256 import sha256 as new
        except ImportError:  # pragma: no cover - other Python versions
            try:
                from _sha2 import sha256 as new
            except ImportError:
                from hashlib import sha256 as new
    return new(data)


def sha256_hex(data: bytes) -> str:
    return sha256(data).hexdigest()


def check_dir_fd(fd: int, path: str) -> None:
    """Refuse a directory we do not own or that others can write into."""
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirError(path, "not a directory")
    if st.st_uid != os.geteuid():
        raise UnsafeDirError(path, f"owned by uid {st.st_uid}, not {os.geteuid()}")
    if st.st_mode & 0o022:
        raise UnsafeDirError(path, f"writable by group or others (mode {st.st_mode & 0o7777:o})")


def _nofollow_dir(name: str, path: str, dir_fd: int | None) -> int:
    """Open the directory `name` without following it if it is a symlink (UnsafeDirError for
    a link or a non-directory, named `path`)."""
    try:
        return os.open(name, _OPEN_DIR, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeDirError(path, "a symlink or not a directory") from None
        raise


def _open_checked(name: str, path: str, dir_fd: int | None = None) -> int:
    """Open a directory without following a final symlink, then check who may write it."""
    fd = _nofollow_dir(name, path, dir_fd)
    try:
        check_dir_fd(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir(path: str, create: bool = False) -> int:
    """Open `path` as a directory fd, every component of it resolved without following a link
    and checked (walk); create it (0700) and its missing parents (0755) if asked. For the
    operator's tools, whose paths are the node's own; the plugin, whose paths a NAD's author may
    name, creates only a leaf (walk with `create`, never `make_parents`)."""
    return walk(path, create=create, mode=DIR_MODE, make_parents=create)


def make_dirs(path: str, mode: int, parent_mode: int = 0o755) -> None:
    """Create `path` (`mode`) and its missing parents (`parent_mode`), with the modes set
    explicitly: os.makedirs gives parents 0777 minus the umask, i.e. 0777 under umask 000.
    Existing directories are left as they are. Every component is walked as `walk` does (no
    link followed, each directory ours and not writable by others)."""
    os.close(walk(path, create=True, mode=mode, parent_mode=parent_mode, make_parents=True))


def check_walk(path: str) -> None:
    """walk's checks of the components of `path` that exist, creating nothing (a path whose
    tail is missing passes: a later walk makes it, checking again)."""
    try:
        os.close(walk(path))
    except FileNotFoundError:
        return


# More components than any path the guard is given needs (its own defaults have 4; paths.py
# bounds a config's paths well below): a bound on the work one walk does, whoever calls it.
MAX_WALK_DEPTH = 256


def walk(
    path: str,
    *,
    create: bool = False,
    mode: int = DIR_MODE,
    parent_mode: int = 0o755,
    make_parents: bool = False,
) -> int:
    """The one safe way to a directory the guard writes in: from `/`, one component at a time
    through the parent's fd, never following a link (ELOOP/ENOTDIR: refused), each directory
    owned by root or our euid and not writable by group or others, except a sticky one (/tmp):
    there others may add names but not rename or remove ours, and the next component must be
    ours. With `create` a missing last component is made through its parent's fd (`mode`,
    chmod'ed explicitly whatever the umask); a missing component above it only with
    `make_parents` (`parent_mode`), otherwise FileNotFoundError, as without `create`.
    UnsafeDirError names the first component refused; more than MAX_WALK_DEPTH components are
    refused before any is opened.

    A string prefix rule alone is walked around by a link above the last component (a
    `logFile` of /tmp/d/link/sub/x.sh, `link` pointing into /etc). Why not
    openat2(RESOLVE_NO_SYMLINKS): it refuses links too, but checks no owner or mode and creates
    nothing, so the walk would still be needed beside it, and Python reaches it only through
    ctypes, whose import took 1.8 to 6 ms here (load 18) on every exec of the plugin; the walk
    is a few openat and fstat calls of the os module. The path of a component is built only
    when it is refused, so a walk's cost grows with its depth, not with the depth's square."""
    path = os.path.normpath(path)
    if not path.startswith("/"):
        raise UnsafeDirError(path, "not an absolute path")
    names = [n for n in path.split("/") if n]
    if len(names) > MAX_WALK_DEPTH:
        raise UnsafeDirError(path, f"deeper than {MAX_WALK_DEPTH} components")
    fd = os.open("/", _OPEN_DIR)
    i = -1
    try:
        _check_step(fd, last=not names)
        last_i = len(names) - 1
        for i, name in enumerate(names):
            last = i == last_i
            may_create = create and (last or make_parents)
            child = _step(fd, name, may_create, mode if last else parent_mode)
            os.close(fd)
            fd = child
            _check_step(fd, last=last)
    except _RefusedError as refused:
        os.close(fd)
        where = "/" + "/".join(names[: i + 1])
        if where == path:
            raise UnsafeDirError(path, refused.why) from None
        raise UnsafeDirError(path, f"{where} is {refused.why}") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


class _RefusedError(Exception):
    """A component walk refuses; walk names it (built once, not at every step)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _step(parent: int, name: str, create: bool, mode: int) -> int:
    try:
        return _nofollow_step(name, parent)
    except FileNotFoundError:
        if not create:
            raise
    try:
        os.mkdir(name, mode, dir_fd=parent)
        made = True
    except FileExistsError:  # another guard was first: checked as any existing dir
        made = False
    fd = _nofollow_step(name, parent)
    if made:
        os.fchmod(fd, mode)
    return fd


def _nofollow_step(name: str, parent: int) -> int:
    try:
        return os.open(name, _OPEN_DIR, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _RefusedError("a symlink or not a directory") from None
        raise


def _check_step(fd: int, *, last: bool) -> None:
    """A directory of a walk: root's or ours, and not writable by group or others; a sticky one
    (others may add names, not move ours) only above the last component."""
    st = os.fstat(fd)
    if st.st_uid not in (0, os.geteuid()):
        raise _RefusedError(f"owned by uid {st.st_uid}, not {os.geteuid()}")
    if st.st_mode & 0o022 and (last or not st.st_mode & stat.S_ISVTX):
        raise _RefusedError(f"writable by group or others (mode {st.st_mode & 0o7777:o})")


def open_subdir(parent_fd: int, name: str, path: str, create: bool = True) -> int:
    """Open (and create) the directory `name` inside an already-checked directory fd."""
    if create:
        try:
            os.mkdir(name, DIR_MODE, dir_fd=parent_fd)
        except FileExistsError:
            pass
    return _open_checked(name, path, parent_fd)


class UnsafeFileError(OSError):
    """A path that is a symlink, not a regular file, or larger than the reader's limit."""


class FileInfo:
    """A regular file's bytes with the mode, owner and link count it had when it was read."""

    __slots__ = ("data", "gid", "mode", "nlink", "uid")

    def __init__(self, data: bytes, st: os.stat_result) -> None:
        self.data = data
        self.mode = stat.S_IMODE(st.st_mode)
        self.uid, self.gid = st.st_uid, st.st_gid
        self.nlink = st.st_nlink

    def distrust(self) -> str | None:
        """Why this file is not one only we could have written (None when it is): another
        owner than our euid, writable by group or others, or a second name (a hard link)."""
        if self.uid != os.geteuid():
            return f"owned by uid {self.uid}, not {os.geteuid()}"
        if self.mode & 0o022:
            return f"writable by group or others (mode {self.mode:o})"
        if self.nlink != 1:
            return f"{self.nlink} hard links"
        return None


def read_regular(dir_fd: int | None, name: str, limit: int = MAX_SMALL) -> FileInfo:
    """The one no-follow read: a regular file's whole content, opened without following a
    symlink at its last component and without blocking on a FIFO. Raises UnsafeFileError for
    a symlink, a special file or one over `limit` bytes. With dir_fd None, `name` is a path."""
    try:
        fd = os.open(name, _OPEN_FILE, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFileError(exc.errno, "is a symlink", name) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFileError(errno.EINVAL, "not a regular file", name)
        if st.st_size > limit:
            raise UnsafeFileError(errno.EFBIG, f"larger than {limit} bytes", name)
        chunks = []
        size = 0
        while size <= limit and (chunk := os.read(fd, 65536)):
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # it grew while we read
            raise UnsafeFileError(errno.EFBIG, f"larger than {limit} bytes", name)
        return FileInfo(b"".join(chunks), st)
    finally:
        os.close(fd)


def read_at(dir_fd: int | None, name: str, limit: int = MAX_SMALL) -> bytes | None:
    """read_regular's bytes, or None when the file is missing, a symlink, a special file or
    too big: for readers to whom any of those means "no usable file here"."""
    try:
        return read_regular(dir_fd, name, limit).data
    except UnsafeFileError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise


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


def temp_name(name: str) -> str:
    """A hidden sibling name for an atomic write of `name`. Unique across processes and PID
    namespaces (two installers in two containers are both PID 1), so a temp file left by a
    crashed run is never in the way, and never loaded as a conf (`.tmp` is no CNI extension)."""
    return f".{name}.{os.getpid()}-{os.urandom(6).hex()}.tmp"


def write_atomic(
    dir_fd: int,
    name: str,
    data: bytes,
    *,
    mode: int = FILE_MODE,
    owner: tuple[int, int] | None = None,
    durable: bool = True,
    unless: Callable[[], bool] | None = None,
) -> bool:
    """The one atomic write: replace `name` in `dir_fd` with `data` (temp file created
    exclusively and without following links, mode set explicitly whatever the umask, fsync,
    rename, fsync of the dir). Without `durable` the fsyncs are skipped: still atomic for
    readers and across a killed process; only a power loss may lose the write. `unless` is
    asked last, just before the rename: if it says True the temp file is removed and nothing
    is replaced (False returned): compare-before-swap for files other writers share."""
    tmp = temp_name(name)
    fd = os.open(tmp, _CREATE_FILE, mode, dir_fd=dir_fd)
    try:
        try:
            os.fchmod(fd, mode)
            if owner is not None and os.geteuid() == 0:
                os.fchown(fd, *owner)
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if unless is not None and unless():
            unlink_at(dir_fd, tmp)
            return False
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        unlink_at(dir_fd, tmp)
        raise
    if durable:
        os.fsync(dir_fd)
    return True


def write_file(
    path: str,
    data: bytes,
    mode: int,
    owner: tuple[int, int] | None = None,
    unless: Callable[[], bool] | None = None,
) -> bool:
    """write_atomic on a path whose directory is not ours to vet (a node's /etc/cni/net.d):
    the directory is opened as it is, the file itself is still never followed."""
    head, tail = os.path.split(path)
    dir_fd = os.open(head or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return write_atomic(dir_fd, tail, data, mode=mode, owner=owner, unless=unless)
    finally:
        os.close(dir_fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def unlink_at(dir_fd: int, name: str) -> bool:
    """Remove `name` (never following it); False when it was already gone."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


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
