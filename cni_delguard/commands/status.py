"""STATUS (spec 1.1.0): forwarded to the delegate.

It fails for the guard's own reasons only when an ADD would fail too (the state dir is unusable,
the delegate is missing): runtimes turn a failed STATUS into a NotReady node, so the guard must
not take a node down for anything less.
"""

from __future__ import annotations

import os

from cni_delguard.cni import errors
from cni_delguard.commands import passthrough
from cni_delguard.state import fsutil, store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cni_delguard.commands.context import Context
    from cni_delguard.guard.config import Settings


def run(ctx: Context, data: bytes) -> bytes:
    from cni_delguard.invoke import delegate

    conf, settings = passthrough.prepare(ctx, data, since="1.1.0")
    try:
        path = delegate.find(settings.delegate_type, ctx.inv.cni_path)
        _probe_state_dir(settings)
    except errors.CniError as exc:
        ctx.record("error", settings.network, decision="status-unavailable", reason=exc.msg)
        raise errors.CniError(errors.STATUS_NOT_AVAILABLE, exc.msg, exc.details) from None
    passthrough.call_logged(ctx, conf, settings, path)
    return b""


def _probe_state_dir(settings: Settings) -> None:
    """What ADD needs first: this network's marker dir, safe, where a marker can be written."""
    with store.MarkerStore(
        settings.state_dir, settings.network, create=True, make_state_dir=settings.make_state_dir
    ) as markers:
        name = f".status-probe.{os.getpid()}"
        try:
            fsutil.write_atomic(markers.fd, name, b"{}")
            fsutil.unlink_at(markers.fd, name)
        except OSError as exc:
            raise errors.CniError(
                errors.IO_FAILURE, f"state dir {markers.path} is not writable", str(exc)
            ) from None
