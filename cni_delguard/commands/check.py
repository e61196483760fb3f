"""CHECK (spec 0.4.0 and later): forwarded to the delegate under the attachment's lock."""

from __future__ import annotations

from cni_delguard.commands import passthrough
from cni_delguard.state import store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cni_delguard.commands.context import Context
    from cni_delguard.state.locking import AttachmentLock


def run(ctx: Context, data: bytes) -> bytes:
    from cni_delguard.invoke import delegate
    from cni_delguard.state.locking import AttachmentLock

    conf, settings = passthrough.prepare(ctx, data, since="0.4.0")
    path = delegate.find(settings.delegate_type, ctx.inv.cni_path)
    key = store.attachment_key(ctx.inv.container_id, ctx.inv.ifname)
    lock_file = store.lock_path(settings.state_dir, settings.network, key)
    with (
        store.MarkerStore(
            settings.state_dir,
            settings.network,
            create=True,
            make_state_dir=settings.make_state_dir,
        ) as markers,
        AttachmentLock(lock_file, settings.lock_timeout, dir_fd=markers.fd) as lock,
    ):
        try:
            passthrough.call_logged(ctx, conf, settings, path)
        finally:
            _forget_lock(markers, key, lock)
    return b""


def _forget_lock(markers: store.MarkerStore, key: str, lock: AttachmentLock) -> None:
    """A CHECK of an attachment that was never added made the lock file only to serialize
    itself: remove it (still holding it, as DEL does), so nothing is left behind for good."""
    if markers.exists(key):
        return
    try:
        lock.remove()
    except OSError:
        pass  # a stale lock file is harmless: the next DEL of this attachment removes it
