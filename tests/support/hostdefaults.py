"""The guard's default dirs on the host, /var/lib/cni/delguard and /var/log/cni-delguard: no test
may touch them (issue 20). Two parts:

`isolate()`, once per test session, before any test runs, as root: the pytest process moves into
a mount namespace of its own (unshare(CLONE_NEWNS), every mount made private, so nothing mounted
here reaches the host) and mounts a fresh tmpfs over /var/log and over /var/lib/cni. Everything a
test starts (the guard, cnitool, containerd) inherits that namespace, and in-process code runs in
it: a guard that falls back to its default log or state dir (a config it cannot read) writes into
the session's tmpfs, never into the host's dirs. /var/lib/cni is made when missing, as
tools/install-deps.sh test makes it for cnitool's binds; the guard's own dirs never are.

`snapshot()`: what is inside those dirs *on the host*: every entry's path, type, mode, owner, size
and mtime, read through a descriptor of the host's root opened before the namespace was made, so
the session's tmpfs cannot hide a write from it. tests/conftest.py compares it before and after
every test. It raises CannotTellError when it cannot read what it would have to compare: a check
that cannot see never passes. (The check before issue 20 compared the dirs' own mtime and link
count: it missed every append to an existing log, and errored on a fresh machine.)
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat

from tests.support import mounts

DEFAULT_DIRS = ("var/lib/cni/delguard", "var/log/cni-delguard")  # relative to the host's root
# What the session's tmpfs covers: a parent of each default dir that exists on a test machine.
COVERED = ("/var/log", "/var/lib/cni")
CLONE_NEWNS = 0x00020000
# One entry: (type and mode, uid, size, mtime in ns); a dir nobody here may list: its own stat.
Entry = tuple[int, int, int, int]


class CannotTellError(AssertionError):
    """What is in the host's default dirs cannot be read, so no change could be seen."""


class _Host:
    root_fd: int | None = None  # the host's / (opened before isolate() left its namespace)
    isolated = ""  # what isolate() did, for the report header


def isolate() -> str:
    """Move this process into a private mount namespace with tmpfs over COVERED; say what was
    done. Idempotent. Not root: nothing is done (a guard run as another user cannot create or
    write the host's default dirs: /var/log and /var/lib are root's), and snapshot() still
    checks."""
    _host_root()  # taken before leaving the host's namespace
    if _Host.isolated:
        return _Host.isolated
    if os.geteuid() != 0:
        _Host.isolated = "not root: the guard's host defaults are root's, checked before and after"
        return _Host.isolated
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:  # root without CAP_SYS_ADMIN (a plain container)
        why = os.strerror(ctypes.get_errno())
        _Host.isolated = f"NOT isolated (unshare: {why}): checked before and after each test"
        return _Host.isolated
    mounts.mount("--make-rprivate", "/")
    for path in COVERED:
        os.makedirs(path, mode=0o755, exist_ok=True)
        mounts.mount("-t", "tmpfs", "-o", "mode=0755,size=256m", "delguard-tests", path)
    _Host.isolated = f"private mount namespace, tmpfs over {' and '.join(COVERED)}"
    return _Host.isolated


def snapshot(root_fd: int | None = None) -> dict[str, Entry | None]:
    """path -> entry for each default dir and everything under it, as the host sees it (through
    `root_fd`, the host's root by default); a default dir that does not exist is None."""
    fd = root_fd if root_fd is not None else _host_root()
    out: dict[str, Entry | None] = {}
    for path in DEFAULT_DIRS:
        try:
            st = os.lstat(path, dir_fd=fd)
        except FileNotFoundError:
            out[path] = None
            continue
        except OSError as exc:
            raise CannotTellError(f"cannot stat /{path}: {exc.strerror}") from None
        out[path] = _entry(st)
        if stat.S_ISDIR(st.st_mode):
            _walk(fd, path, out)
    return out


def _host_root() -> int:
    if _Host.root_fd is None:
        _Host.root_fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    return _Host.root_fd


def _entry(st: os.stat_result) -> Entry:
    return (st.st_mode, st.st_uid, st.st_size, st.st_mtime_ns)


def _walk(root_fd: int, path: str, out: dict[str, Entry | None]) -> None:
    """Every entry below the dir `path` (relative to root_fd), never following a symlink."""
    try:
        dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root_fd)
    except OSError as exc:
        if exc.errno == errno.EACCES and not os.access(path, os.W_OK, dir_fd=root_fd):
            return  # closed to us both ways: nothing run as this user can change what is inside
        raise CannotTellError(f"cannot list /{path}: {exc.strerror}") from None
    try:
        names = sorted(os.listdir(dir_fd))
        for name in names:
            child = f"{path}/{name}"
            st = os.lstat(name, dir_fd=dir_fd)
            out[child] = _entry(st)
            if stat.S_ISDIR(st.st_mode):
                _walk(root_fd, child, out)
    except FileNotFoundError:
        raise CannotTellError(f"/{path} changed while it was read") from None
    finally:
        os.close(dir_fd)


def changes(before: dict[str, Entry | None], after: dict[str, Entry | None]) -> list[str]:
    """What differs, one line per path, for the assertion message."""
    return [
        f"/{path}: {_show(before.get(path))} -> {_show(after.get(path))}"
        for path in sorted(set(before) | set(after))
        if before.get(path) != after.get(path)
    ]


def _show(entry: Entry | None) -> str:
    if entry is None:
        return "absent"
    mode, uid, size, mtime = entry
    return f"mode {mode:o} uid {uid} size {size} mtime {mtime}"
