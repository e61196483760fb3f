"""The node's installer lock: one installer at a time changes the bin dir and the conf.

An flock on `<state-dir>/installer/lock`, a host path every installer mounts: flock locks the
file's inode, so it excludes installers in other containers (other mount and PID namespaces) as
well as in this one, and the kernel drops it when its holder dies (no stale lock after a crash
or a SIGKILL). install, uninstall and every re-wrap or repair of the watcher hold it for the
whole read-check-write, which makes them serial on a node: a copy, a prune, an uninstall never
overlap. Installers from before this lock existed are not excluded.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from cni_delguard.node import record
from cni_delguard.node.errors import LockTimeoutError

LOCK_NAME = "lock"
DEFAULT_TIMEOUT = 120.0  # a copy of the frozen bundle takes well under a second; a hung peer not


@contextmanager
def held(state_dir: str, timeout: float = DEFAULT_TIMEOUT) -> Iterator[None]:
    path = record.installer_dir(state_dir)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(os.path.join(path, LOCK_NAME), flags, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockTimeoutError(
                        f"another installer has held {path}/{LOCK_NAME} for {timeout:g} s; "
                        f"find it (fuser -v {path}/{LOCK_NAME}) and try again"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the flock
