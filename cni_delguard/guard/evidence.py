"""Gathering the evidence a DEL decides on: a handful of stat() calls and one small read.

This runs on every DEL of a retry storm, so it opens nothing it does not need: existence checks
use lstat (never following a link), and the marker is read only when it exists.
"""

from __future__ import annotations

import errno
import os

from cni_delguard.guard.decide import Evidence
from cni_delguard.state import fsutil, store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cni_delguard.guard.config import Peek, Settings


def _exists(path: str) -> bool:
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        # A name longer than a file name can be cannot exist. Anything else (EACCES, ELOOP ...)
        # may hide a file: err on the side of forwarding.
        return exc.errno != errno.ENAMETOOLONG
    return True


def gather(src: Peek | Settings, container_id: str, ifname: str, prev_result: bool) -> Evidence:
    """Evidence for (network, container, ifname). Without a usable network name, only the
    multus cache (keyed by container alone) can be looked at."""
    ev = Evidence(prev_result=prev_result)
    ev.multus_cache = any(_exists(os.path.join(d, container_id)) for d in src.multus_cache_dirs)
    network = src.network
    if not network:
        return ev
    ev.result_cache = any(
        _exists(os.path.join(d, f"{network}-{container_id}-{ifname}"))
        for d in src.result_cache_dirs
    )
    key = store.attachment_key(container_id, ifname)
    marker = store.marker_path(src.state_dir, network, key)
    if _exists(marker):
        ev.marker = store.parse_marker(_read(marker))
    ev.lock = _exists(store.lock_path(src.state_dir, network, key))
    return ev


def _read(path: str) -> bytes:
    """The bytes of a marker lstat found (never through a symlink); empty, which parses as
    CORRUPT, when it cannot be read as a regular file after all."""
    try:
        data = fsutil.read_at(None, path)
    except OSError:
        return b""
    return b"" if data is None else data
