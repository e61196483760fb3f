"""The guard's state on a node, read for people: markers and lock files of every network.

Read through directory descriptors with fsutil (no symlink followed, bounded reads), the same
way the plugin reads them; the store's layout is docs/DESIGN.md's "On-disk state".
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from dataclasses import dataclass, field

from cni_delguard.state import store
from cni_delguard.state.marker import CORRUPT, KNOWN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass
class Marker:
    network: str
    key: str
    path: str
    state: str
    container_id: str = ""
    ifname: str = ""
    time: float | None = None
    pod: dict[str, str] = field(default_factory=dict)

    def age(self, now: float) -> float | None:
        return None if self.time is None else max(0.0, now - self.time)

    def pod_name(self) -> str:
        """`namespace/name` when the marker names its pod (its "pod" field)."""
        ns, name = self.pod.get("namespace"), self.pod.get("name")
        return f"{ns}/{name}" if ns and name else ""

    def as_dict(self, now: float) -> dict[str, Any]:
        age = self.age(now)
        return {
            "network": self.network,
            "containerID": self.container_id,
            "ifname": self.ifname,
            "state": self.state,
            "time": self.time,
            "ageSeconds": None if age is None else round(age, 1),
            "pod": self.pod or None,
            "path": self.path,
        }


@dataclass
class LockFile:
    network: str
    key: str
    path: str
    has_marker: bool
    mtime: float


def skipped(state_dir: str) -> list[tuple[str, str]]:
    """(path, why) of each network dir the shared rule skips (store.network_dirs)."""
    return [(d.path, d.skipped) for d in store.network_dirs(state_dir) if d.skipped is not None]


def markers(state_dir: str) -> list[Marker]:
    """The markers of every network dir the shared rule reads (store.network_dirs)."""
    found = []
    for d in store.network_dirs(state_dir):
        if d.fd is None:
            continue
        for name in sorted(os.listdir(d.fd)):
            if name.startswith(".") or not name.endswith(store.MARKER_SUFFIX):
                continue
            path = os.path.join(d.path, name)
            found.append(_marker(d.name, name[: -len(store.MARKER_SUFFIX)], path, d.fd))
    return found


def _marker(network: str, key: str, path: str, fd: int) -> Marker:
    """The marker as store.marker_body reads it: one that cannot be read or is not a JSON
    object has no fields, and so no known state."""
    try:
        body = store.marker_body(fd, key)
    except OSError:
        body = {}
    m = Marker(network, key, path, CORRUPT)
    state = body.get("state")
    m.state = state if state in KNOWN else CORRUPT
    m.container_id = _text(body.get("containerID"))
    m.ifname = _text(body.get("ifname"))
    m.time = store.epoch(body.get("time"))
    pod = body.get("pod")
    if isinstance(pod, dict):
        m.pod = {k: v for k in ("namespace", "name", "uid") if isinstance(v := pod.get(k), str)}
    return m


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def lock_files(state_dir: str) -> list[LockFile]:
    """The lock files of every network dir the shared rule reads (store.network_dirs)."""
    found = []
    for d in store.network_dirs(state_dir):
        if d.fd is None:
            continue
        names = set(os.listdir(d.fd))
        for name in sorted(names):
            if name.startswith(".") or not name.endswith(store.LOCK_SUFFIX):
                continue
            key = name[: -len(store.LOCK_SUFFIX)]
            try:
                mtime = os.stat(name, dir_fd=d.fd, follow_symlinks=False).st_mtime
            except FileNotFoundError:
                continue
            path = os.path.join(d.path, name)
            found.append(LockFile(d.name, key, path, key + store.MARKER_SUFFIX in names, mtime))
    return found


def lock_held(path: str) -> bool | None:
    """True when an operation holds the lock now, False when it is free, None when it is gone.
    A flock attempt on a read-only descriptor: it never creates the file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP):
            return None
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def remove_orphaned_lock(lock: LockFile) -> str:
    """Remove a lock file that no operation holds and no marker needs, while holding it (as
    a finishing DEL does: a waiter that then wins the flock sees the file gone and retries)."""
    fd = os.open(lock.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "left in place: an operation holds it now"
        marker = lock.path[: -len(store.LOCK_SUFFIX)] + store.MARKER_SUFFIX
        if os.path.lexists(marker):
            return "left in place: a marker appeared"
        if os.stat(lock.path, follow_symlinks=False).st_ino != os.fstat(fd).st_ino:
            return "left in place: replaced meanwhile"
        os.unlink(lock.path)
        return "removed"
    finally:
        os.close(fd)


def now() -> float:
    return time.time()
