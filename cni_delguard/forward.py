"""CHECK, GC and STATUS: forwarded to the delegate faithfully.

CHECK runs under the attachment's lock. GC also prunes the guard's own markers of that network
that the runtime no longer lists as valid. STATUS fails for the guard's own reasons only when an
ADD would fail too (unusable state dir, delegate missing): runtimes turn a failed STATUS into a
NotReady node.
"""

from __future__ import annotations

import os

from cni_delguard import errors, fsutil, inject, store
from cni_delguard.plugin import load, require_version

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cni_delguard.config import Settings
    from cni_delguard.plugin import Context


def run(ctx: Context, conf: dict[str, Any]) -> bytes:
    settings = load(ctx, conf)
    command = ctx.inv.command
    if command == "CHECK":
        require_version(settings, "0.4.0", command)
        return _check(ctx, conf, settings)
    require_version(settings, "1.1.0", command)
    if command == "GC":
        return _gc(ctx, conf, settings)
    return _status(ctx, conf, settings)


def _call(ctx: Context, conf: dict[str, Any], settings: Settings, path: str) -> None:
    from cni_delguard import delegate

    command = ctx.inv.command
    outcome = delegate.run(
        path,
        command,
        inject.delegate_conf(conf, settings),
        ctx.environ,
        settings.timeouts[command.lower()],
    )
    ctx.fields = {"delegateExit": outcome.exit_status, "delegateMs": round(outcome.duration_ms, 1)}
    if not outcome.ok:
        raise delegate.error_from(outcome, settings.delegate_type, command)


def _check(ctx: Context, conf: dict[str, Any], settings: Settings) -> bytes:
    from cni_delguard import delegate
    from cni_delguard.locking import AttachmentLock

    path = delegate.find(settings.delegate_type, ctx.inv.cni_path)
    key = store.attachment_key(ctx.inv.container_id, ctx.inv.ifname)
    lock_file = store.lock_path(settings.state_dir, settings.network, key)
    with (
        store.MarkerStore(settings.state_dir, settings.network, create=True),
        AttachmentLock(lock_file, settings.lock_timeout),
    ):
        _logged(ctx, conf, settings, path)
    return b""


def _logged(ctx: Context, conf: dict[str, Any], settings: Settings, path: str) -> None:
    try:
        _call(ctx, conf, settings, path)
    except errors.CniError as exc:
        ctx.record(
            "error",
            settings.network,
            decision="forward",
            reason="delegate failed",
            error={"code": exc.code, "msg": exc.msg},
            **ctx.fields,
        )
        raise
    ctx.record(
        "info", settings.network, decision="forward", reason="delegate succeeded", **ctx.fields
    )


def _gc(ctx: Context, conf: dict[str, Any], settings: Settings) -> bytes:
    from cni_delguard import delegate, gc

    valid = conf.get(inject.VALID_ATTACHMENTS)
    pruned = gc.prune(settings, valid) if valid is not None else []
    ctx.fields = {"pruned": pruned}
    path = delegate.find(settings.delegate_type, ctx.inv.cni_path)
    _logged(ctx, conf, settings, path)
    return b""


def _status(ctx: Context, conf: dict[str, Any], settings: Settings) -> bytes:
    from cni_delguard import delegate

    try:
        path = delegate.find(settings.delegate_type, ctx.inv.cni_path)
        _probe_state_dir(settings)
    except errors.CniError as exc:
        ctx.record("error", settings.network, decision="status-unavailable", reason=exc.msg)
        raise errors.CniError(errors.STATUS_NOT_AVAILABLE, exc.msg, exc.details) from None
    _logged(ctx, conf, settings, path)
    return b""


def _probe_state_dir(settings: Settings) -> None:
    """What ADD needs first: this network's marker dir, safe, where a marker can be written."""
    with store.MarkerStore(settings.state_dir, settings.network, create=True) as markers:
        name = f".status-probe.{os.getpid()}"
        try:
            fsutil.write_atomic(markers.fd, name, b"{}")
            fsutil.unlink_at(markers.fd, name)
        except OSError as exc:
            raise errors.CniError(
                errors.IO_FAILURE, f"state dir {markers.path} is not writable", str(exc)
            ) from None
