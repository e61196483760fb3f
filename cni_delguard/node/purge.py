"""`uninstall --purge`: the guard's state dir and log dir go too, once the conf is restored.

Two steps, because the hold needs a little of the state dir while it holds:

- `empty`, right after the uninstall: everything in the state dir but the installer's lock and
  uninstall record (the readiness probe of the hold reads the record, and it keeps any watcher
  from wrapping again), and everything in the log dir.
- `finish`, when the hold ends (its pod is deleted: `helm uninstall`): the installer's dir too,
  then the two dirs themselves where they can go. In a pod they are its hostPath mounts, which
  cannot be removed from inside (EBUSY): they stay, empty, and the message says so.

Each step runs under the node's installer lock and only while the uninstall is in force (an
install in between lifted the record: its guard may need every marker) and the plugin is off the
bin dir (the uninstall keeps it while some conf still names the guard, and then the markers are
still the guard's evidence). Nothing is followed: each dir is reached by fsutil.walk (no link at
any component), and removal works through its descriptor (shutil.rmtree with dir_fd, which
never follows a link either).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat

from cni_delguard.cni import errors
from cni_delguard.host.root import as_root
from cni_delguard.node import bundle, hostlock, record
from cni_delguard.node.errors import InstallerError
from cni_delguard.state import fsutil

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cni_delguard.node.actions import Options, Say


def log_dir(opts: Options) -> str:
    """The log's dir on the node, under the root (the layout's logFile)."""
    return as_root(opts.root).here(os.path.dirname(opts.log_file))


def empty(opts: Options, say: Say) -> bool:
    """Empty the state dir (but the installer's lock and record) and the log dir; False, and
    nothing removed, when the uninstall is not (or no longer) complete."""
    with hostlock.held(opts.state_dir, opts.lock_timeout):
        if not _uninstalled(opts, say):
            return False
        _say(say, opts.state_dir, _remove_in(opts.state_dir, keep={record.SUBDIR}))
        _say(say, log_dir(opts), _remove_in(log_dir(opts), keep=set()))
    return True


def finish(opts: Options, say: Say) -> None:
    """After the hold: the installer's dir (lock and record) and both dirs themselves. The lock
    file goes while it is held: an installer starting in that instant locks a file nobody else
    will (the only moment two could run); after `helm uninstall` none is left to start."""
    with hostlock.held(opts.state_dir, opts.lock_timeout):
        if not _uninstalled(opts, say):
            return
        _say(say, opts.state_dir, _remove_in(opts.state_dir, keep=set()))
        _say(say, log_dir(opts), _remove_in(log_dir(opts), keep=set()))
    for path in (opts.state_dir, log_dir(opts)):
        say(_rmdir(path))


def _uninstalled(opts: Options, say: Say) -> bool:
    if record.uninstalled(opts.state_dir) is None:
        say("not purging: an install has lifted the uninstall since")
        return False
    if os.path.lexists(os.path.join(opts.bin_dir, bundle.LINK_NAME)):
        say(f"not purging: {opts.bin_dir}/{bundle.LINK_NAME} is still in use by a conf")
        return False
    return True


def _remove_in(path: str, keep: set[str]) -> list[str]:
    """Remove every entry of the dir `path` but those named in `keep`; the names removed.
    A dir that is not there has nothing to remove."""
    try:
        fd = fsutil.walk(path)
    except FileNotFoundError:
        return []
    except errors.CniError as exc:  # a link or a dir others may write: refused, not followed
        raise InstallerError(f"not purging: {exc.msg}") from None
    removed = []
    try:
        for name in sorted(os.listdir(fd)):
            if name in keep:
                continue
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)
            removed.append(name)
    finally:
        os.close(fd)
    return removed


def _say(say: Say, path: str, removed: list[str]) -> None:
    if removed:
        say(f"purged {path}: removed {', '.join(removed)}")


def _rmdir(path: str) -> str:
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return f"purged: {path} is gone"
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            return f"purged: {path} is left empty (a mount point here: the pod's hostPath)"
        return f"purged: {path} is left: {exc.strerror}"
    return f"purged: removed {path}"
