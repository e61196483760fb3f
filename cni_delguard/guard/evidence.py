"""Gathering the evidence a DEL decides on: a handful of stat() calls and small reads.

This runs on every DEL of a retry storm, so it opens nothing it does not need: existence checks
use lstat (never following a link), and the marker and libcni's cache are read only when they
exist (the skip path, with no evidence at all, reads nothing).
"""

from __future__ import annotations

import errno
import os

from cni_delguard.cni import jsonlite
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
    for d in src.result_cache_dirs:
        path = os.path.join(d, f"{network}-{container_id}-{ifname}")
        if not _exists(path):
            continue
        if is_libcni_result(_read(path, MAX_RESULT_CACHE)):
            ev.result_cache = True
            break
        ev.bad_result_cache = True
    key = store.attachment_key(container_id, ifname)
    marker = store.marker_path(src.state_dir, network, key)
    if _exists(marker):
        ev.marker = store.parse_marker(_read(marker))
    ev.lock = _exists(store.lock_path(src.state_dir, network, key))
    return ev


# libcni's cache holds the whole network config (base64) and the result; the runtime's config is
# bounded at 4 MiB on stdin (skel.MAX_STDIN), which base64 makes 5.4 MiB. A file larger than
# this bound is read truncated and so does not parse: at most "attempted".
MAX_RESULT_CACHE = 8 * 1024 * 1024
LIBCNI_CACHE_KIND = "cniCacheV1"


def is_libcni_result(data: bytes) -> bool:
    """True for a libcni cache of an ADD's result (libcni/api.go cachedInfo: kind "cniCacheV1",
    and a `result` object, written once the whole ADD succeeded)."""
    if not data:
        return False
    try:
        cached = jsonlite.loads(data)
    except (ValueError, RecursionError):
        return False
    return (
        isinstance(cached, dict)
        and cached.get("kind") == LIBCNI_CACHE_KIND
        and isinstance(cached.get("result"), dict)
    )


def _read(path: str, limit: int = fsutil.MAX_SMALL) -> bytes:
    """The bytes of a file lstat found (never through a symlink); empty, which parses as
    CORRUPT (or not a result), when it cannot be read as a regular file after all."""
    try:
        data = fsutil.read_at(None, path, limit)
    except OSError:
        return b""
    return b"" if data is None else data
