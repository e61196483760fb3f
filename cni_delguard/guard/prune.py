"""GC of the guard's own state: markers, lock files and temp files of attachments the runtime no
longer lists in `cni.dev/valid-attachments` (spec 1.1.0). Nothing is pruned without that list.

Each attachment is pruned under its own lock, taken without waiting: an attachment busy with an
operation right now is left for the next GC.
"""

from __future__ import annotations

import os

from cni_delguard.cni import errors
from cni_delguard.state import fsutil, store
from cni_delguard.state.locking import AttachmentLock

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cni_delguard.guard.config import Settings


def valid_keys(valid: object) -> set[str]:
    """The attachment keys of a valid-attachments list (code 7 when it is malformed)."""
    if not isinstance(valid, list):
        raise errors.CniError(errors.INVALID_CONFIG, "cni.dev/valid-attachments must be a list")
    keys = set()
    for item in valid:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("containerID"), str)
            or not isinstance(item.get("ifname"), str)
        ):
            raise errors.CniError(
                errors.INVALID_CONFIG,
                "cni.dev/valid-attachments entries need string containerID and ifname",
            )
        keys.add(store.attachment_key(item["containerID"], item["ifname"]))
    return keys


def _key_of(name: str) -> str | None:
    """The attachment key a file in a network dir belongs to."""
    for suffix in (store.MARKER_SUFFIX, store.LOCK_SUFFIX, store.RELEASE_SUFFIX):
        if not name.startswith(".") and name.endswith(suffix):
            return name[: -len(suffix)]
    if name.startswith(".") and name.endswith(".tmp"):
        # .<key>.json.<pid>.tmp
        return name[1:].rsplit(".", 3)[0] if name.count(".") >= 4 else None
    return None


def prune(settings: Settings, valid: object) -> tuple[list[str], str | None]:
    """Remove the state of every attachment of this network that is not valid: (the keys
    pruned, why nothing was pruned when the network's dir is skipped). The rule for which dirs
    are read is store.network_dirs's, shared with the operator's tools: a dir that is not the
    guard's own is never read or written through, and GC goes on to the delegate."""
    keep = valid_keys(valid)
    try:
        markers = store.MarkerStore(settings.state_dir, settings.network, create=False)
    except FileNotFoundError:
        return [], None
    except fsutil.UnsafeDirError as exc:
        return [], exc.msg
    pruned = []
    with markers:
        stale = sorted({k for n in os.listdir(markers.fd) if (k := _key_of(n)) and k not in keep})
        for key in stale:
            lock_file = store.lock_path(settings.state_dir, settings.network, key)
            try:
                lock = AttachmentLock(lock_file, timeout=0.0, dir_fd=markers.fd)
            except errors.CniError:
                continue  # busy: the next GC will see it again
            with lock:
                markers.remove(key)
                lock.remove()
            pruned.append(key)
    return pruned, None
