"""The one-folder bundle into the CNI bin dir, switched atomically.

Layout in the bin dir:

    cni-delguard -> .cni-delguard-<digest>/cni-delguard    (relative symlink, what runtimes exec)
    .cni-delguard-<digest>/                                 (a complete copy of the bundle)

A new version is copied into `.cni-delguard-<digest>.<pid>.tmp/`, every file and directory
fsynced, and the directory renamed to its final name: it appears complete or not at all. Only then
is the `cni-delguard` symlink replaced (a new symlink renamed over it). A frozen one-folder
executable keeps loading files from its folder after exec (libpython, extension modules), so the
version just replaced is kept until the next upgrade: a plugin started from it a moment before the
switch can still finish. Older versions are removed.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from dataclasses import dataclass

from cni_delguard.node import fsops
from cni_delguard.node.errors import InstallerError
from cni_delguard.state import fsutil

LINK_NAME = "cni-delguard"
PREFIX = ".cni-delguard-"
_STALE_TMP_SECONDS = 600


class BundleError(InstallerError):
    """The bundle cannot be installed (missing, not executable, or unsafe)."""


@dataclass(frozen=True)
class Plan:
    bin_dir: str
    bundle_dir: str
    digest: str
    current: str | None  # what the link points to now (None: no link)

    @property
    def version_name(self) -> str:
        return PREFIX + self.digest[:16]

    @property
    def target(self) -> str:
        return f"{self.version_name}/{LINK_NAME}"

    @property
    def up_to_date(self) -> bool:
        if self.current != self.target:
            return False
        installed = os.path.join(self.bin_dir, self.version_name)
        return os.path.isdir(installed) and tree_digest(installed) == self.digest


def tree_digest(root: str) -> str:
    """sha256 over the relative paths, kinds, exec bits, contents and link targets of a tree."""
    h = fsutil.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(_j(dirpath, d))]):
            path = _j(dirpath, name)
            rel = os.path.normpath(_j(rel_dir, name))
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                h.update(f"l {rel} {os.readlink(path)}\n".encode())
            elif stat.S_ISREG(st.st_mode):
                h.update(f"f {rel} {int(bool(st.st_mode & 0o111))} ".encode())
                h.update(_file_sha(path) + b"\n")
            else:
                raise BundleError(f"bundle entry {rel} is neither a file, a dir nor a symlink")
        h.update(f"d {os.path.normpath(rel_dir)}\n".encode())
    return h.hexdigest()


def _j(a: str, b: str) -> str:
    return os.path.join(a, b)


def _file_sha(path: str) -> bytes:
    h = fsutil.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1024 * 1024):
            h.update(chunk)
    return h.hexdigest().encode()


def plan(bundle_dir: str, bin_dir: str) -> Plan:
    exe = os.path.join(bundle_dir, LINK_NAME)
    if not os.path.isfile(exe) or not os.access(exe, os.X_OK):
        raise BundleError(f"no executable {LINK_NAME} in bundle dir {bundle_dir}")
    if not os.path.isdir(bin_dir):
        raise BundleError(f"bin dir {bin_dir} does not exist")
    return Plan(bin_dir, bundle_dir, tree_digest(bundle_dir), current_target(bin_dir))


def current_target(bin_dir: str) -> str | None:
    link = os.path.join(bin_dir, LINK_NAME)
    try:
        return os.readlink(link)
    except FileNotFoundError:
        return None
    except OSError:  # EINVAL: a regular file, placed by something else
        return ""


def apply(p: Plan) -> None:
    """Copy the version in (unless present and intact), switch the link, prune old versions."""
    final = os.path.join(p.bin_dir, p.version_name)
    if os.path.isdir(final) and tree_digest(final) != p.digest:
        _remove_tree(final)  # damaged by hand: never point the link at it
    if not os.path.isdir(final):
        _copy_version(p.bundle_dir, final)
    link = os.path.join(p.bin_dir, LINK_NAME)
    if os.path.isdir(link) and not os.path.islink(link):
        raise BundleError(f"{link} is a directory; refusing to replace it")
    if p.current != p.target:
        fsops.symlink_atomic(p.target, link)
    keep = {p.version_name, _version_of(p.current)}
    prune(p.bin_dir, keep)


def _version_of(target: str | None) -> str:
    head = (target or "").split("/", 1)[0]
    return head if head.startswith(PREFIX) and "/" in (target or "") else ""


def _copy_version(src: str, final: str) -> None:
    tmp = f"{final}.{os.getpid()}.tmp"
    _remove_tree(tmp)
    try:
        _copy_tree(src, tmp)
        os.rename(tmp, final)
    except BaseException:
        _remove_tree(tmp)
        raise
    fsops.fsync_dir(os.path.dirname(final))


def _copy_tree(src: str, dst: str) -> None:
    os.mkdir(dst, 0o700)  # opened up to 0755 once complete, just before the rename
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        target = os.path.join(dst, entry.name)
        if entry.is_symlink():
            link = os.readlink(entry.path)
            if os.path.isabs(link) or ".." in link.split("/"):
                raise BundleError(f"bundle symlink {entry.path} points outside the bundle")
            os.symlink(link, target)
        elif entry.is_dir():
            _copy_tree(entry.path, target)
        else:
            executable = entry.stat(follow_symlinks=False).st_mode & 0o111
            fsops.copy_file(entry.path, target, 0o755 if executable else 0o644)
    os.chmod(dst, 0o755)  # noqa: S103 - a bin dir entry: root-owned, world-readable like /opt/cni/bin
    fsops.fsync_dir(dst)


def prune(bin_dir: str, keep: set[str]) -> list[str]:
    """Remove our version dirs not in `keep`, and temp dirs left by crashed runs."""
    removed = []
    now = time.time()
    for entry in os.scandir(bin_dir):
        if not entry.name.startswith(PREFIX) or entry.name in keep:
            continue
        if entry.name.endswith(".tmp"):
            fresh = now - entry.stat(follow_symlinks=False).st_mtime < _STALE_TMP_SECONDS
            if fresh and not entry.name.endswith(f".{os.getpid()}.tmp"):
                continue  # another installer may be copying right now
        _remove_tree(entry.path)
        removed.append(entry.name)
    return removed


def uninstall(bin_dir: str) -> list[str]:
    """Remove the link (if it is ours) and every version dir; return what was removed."""
    removed = []
    link = os.path.join(bin_dir, LINK_NAME)
    if _version_of(current_target(bin_dir)):
        os.unlink(link)
        fsops.fsync_dir(bin_dir)
        removed.append(LINK_NAME)
    return removed + prune(bin_dir, set())


def _remove_tree(path: str) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)
