"""`NodeRoot`: the node's `/` as this process sees it (`--root`), and the rules for touching it.

Three ways to name a node path, each one method:

- `here(path)`: the node path as seen from here. Normalised before it is joined (`..` stops at
  the node's `/`, as the kernel's walk stops at a chroot's), so no path leaves the root; no link
  is followed. Also what a node path becomes once `resolve` has followed the node's links.
- `resolve(path)`: the node path with the node's own links followed as the node follows them: a
  link's absolute target is taken under the root, as a chroot takes it. A plain join would let
  the kernel follow such a link out of the root: k3s's data/current points at the running
  release by its absolute host path, which from a container that sees the host at /host names
  nothing (or, from a copy of a node on another machine, that machine's own dir).
- `on_node(here)`: a path seen from here, as the node names it (None when it is not under
  the root).

`read(path, limit)` opens each component below the root through its parent's descriptor
without following a link (a link at any component is refused, ELOOP/ENOTDIR as UnsafeFileError),
and reads a regular file of at most `limit` bytes (fsutil.read_regular: no FIFO waited on).
A caller who wants the node's links followed asks `resolve` first and reads what it returns:
which links are followed is then the caller's decision, made visible.

`process(pid)` is the root of a process of the node (`/proc/PID/root`) as a `NodeRoot` nested in
this one: its paths are normalised against it (a `-config /../../etc/x` of that process names its
own /etc/x, never a file beside it), and nothing found through it is ever executed (run.py).
"""

from __future__ import annotations

import errno
import os
import stat

from cni_delguard.state import fsutil
from cni_delguard.tooling import UsageError

_MAX_LINKS = 40  # as the kernel's path walk (ELOOP past 40 links)
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class OutsideRootError(UsageError):
    """A path that is not an absolute node path (or holds a NUL), or a loop of links."""


def absolute(path: str) -> str:
    """A path as the node names it, normalised as the guard reads its config (`/../var/lib` is
    `/var/lib`: `..` stops at /); OutsideRootError when it is not absolute or holds a NUL."""
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
        raise OutsideRootError(f"{path!r} must be an absolute path")
    return os.path.normpath("/" + path.lstrip("/"))


def as_root(root: NodeRoot | str) -> NodeRoot:
    """A NodeRoot, or the path of one (the API's functions take either)."""
    return root if isinstance(root, NodeRoot) else NodeRoot(root)


class NodeRoot:
    """The node's `/` at `path` (as seen from here). `parent` and `entry` are set for a
    process's root (`process`): `entry` is `/proc/PID/root` in the parent."""

    def __init__(self, path: str = "/", *, parent: NodeRoot | None = None, entry: str = "") -> None:
        self.path = os.path.abspath(path)
        self.parent, self.entry = parent, entry

    def __repr__(self) -> str:
        return f"NodeRoot({self.path!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NodeRoot) and (self.path, self.entry) == (other.path, other.entry)

    def __hash__(self) -> int:
        return hash((self.path, self.entry))

    @property
    def is_host(self) -> bool:
        """This process's own `/` is the node's (no nesting, no other root)."""
        return self.path == "/" and self.parent is None

    @property
    def through_process(self) -> bool:
        """Reached through a process's /proc/PID/root (here or in a root above)."""
        return self.parent is not None

    def here(self, path: str) -> str:
        """`path` (absolute, as the node names it) as seen from here; normalised first, so it
        never leaves the root. No link is followed."""
        inside = absolute(path).lstrip("/")
        return os.path.join(self.path, inside) if inside else self.path

    def on_node(self, here: str) -> str | None:
        """A path seen from here, as the node names it; None when it is not under the root."""
        here = os.path.normpath(os.path.abspath(here))
        if self.path == "/":
            return here
        inside = os.path.relpath(here, self.path)
        if inside == ".." or inside.startswith("../"):
            return None
        return "/" if inside == "." else "/" + inside

    def resolve(self, path: str) -> str:
        """`path` with the node's links followed inside the root (a node path). A missing
        component and what follows it are taken as they are. OutsideRootError for a loop."""
        todo = [p for p in absolute(path).split("/") if p]
        done: list[str] = []
        links = 0
        while todo:
            part = todo.pop(0)
            if part in (".", ".."):
                if part == ".." and done:
                    done.pop()
                continue
            try:
                target = os.readlink(os.path.join(self.path, *done, part))
            except OSError:  # not a link, or not there: taken as it is
                done.append(part)
                continue
            links += 1
            if links > _MAX_LINKS:
                raise OutsideRootError(f"{path}: too many levels of symbolic links under "
                                       f"{self.path}")
            if target.startswith("/"):
                done = []
            todo = [p for p in target.split("/") if p] + todo
        return "/" + "/".join(done)

    def located(self, path: str) -> str:
        """`here(resolve(path))`: the file the node means by `path`, as seen from here."""
        return self.here(self.resolve(path))

    def process(self, pid: int) -> NodeRoot:
        """The root of the node's process `pid` (its /proc/PID/root), nested in this one."""
        if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
            raise OutsideRootError(f"{pid!r} is not a process id")
        entry = f"/proc/{pid}/root"
        return NodeRoot(self.here(entry), parent=self, entry=entry)

    def open_dir(self, path: str = "/") -> int:
        """A descriptor of the directory `path`, every component below the root opened
        without following a link (UnsafeFileError for a link or a non-directory)."""
        fd = self._open_root()
        try:
            for name in [p for p in absolute(path).split("/") if p]:
                child = _nofollow(fd, name, path)
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read(self, path: str, limit: int) -> bytes:
        """The bytes of the regular file `path`, at most `limit` of them, no link followed at
        any component. OSError (UnsafeFileError for a link, a special file or a file over
        `limit`; FileNotFoundError for a missing one)."""
        node_path = absolute(path)
        head, name = os.path.split(node_path)
        if not name:
            raise fsutil.UnsafeFileError(errno.EISDIR, "not a regular file", path)
        fd = self.open_dir(head)
        try:
            return fsutil.read_regular(fd, name, limit).data
        finally:
            os.close(fd)

    def read_or_none(self, path: str, limit: int) -> bytes | None:
        """`read`'s bytes, or None when there is no usable file (missing, a link on the way,
        not regular, too big, unreadable, or not a node path)."""
        try:
            return self.read(path, limit)
        except (OSError, OutsideRootError):
            return None

    def head(self, path: str, size: int) -> bytes:
        """The first `size` bytes of the regular file `path` (b"" when there is no such file
        or a link is on the way): for a look at a header, whatever the file's length."""
        try:
            head, name = os.path.split(absolute(path))
            fd = self.open_dir(head)
            try:
                f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                            dir_fd=fd)
            finally:
                os.close(fd)
            try:
                return os.read(f, size) if stat.S_ISREG(os.fstat(f).st_mode) else b""
            finally:
                os.close(f)
        except (OSError, OutsideRootError):
            return b""

    def lexists(self, path: str) -> bool:
        return os.path.lexists(self.here(path))

    def is_dir(self, path: str) -> bool:
        """A directory the node has at `path`, its links followed inside the root."""
        return os.path.isdir(self.located(path))

    def _open_root(self) -> int:
        """A descriptor of the root itself: `--root` as given (trusted: the operator names
        it); a process's root is its parent's /proc/PID walked without links, then the one
        link meant, `root`, followed."""
        if self.parent is None:
            return os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        head, last = os.path.split(self.entry)
        parent = self.parent.open_dir(head)
        try:
            return os.open(last, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=parent)
        finally:
            os.close(parent)


def _nofollow(parent: int, name: str, path: str) -> int:
    try:
        fd = os.open(name, _OPEN_DIR, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise fsutil.UnsafeFileError(exc.errno, f"{name} is a symlink or not a directory",
                                         path) from None
        raise
    if not stat.S_ISDIR(os.fstat(fd).st_mode):  # O_DIRECTORY makes this so; kept explicit
        os.close(fd)
        raise fsutil.UnsafeFileError(errno.ENOTDIR, "not a directory", path)
    return fd
