"""ADD: record the attempt durably, run the delegate, record completion, return its result.

The "attempted" marker is on disk (fsynced) before the delegate runs, so a crash at any later
instant leaves evidence for the DEL that follows. When the delegate fails, its DEL runs (the spec
asks that of a delegating plugin) and its own error goes back to the runtime unchanged.
"""

from __future__ import annotations

from cni_delguard.cni import errors, jsonlite
from cni_delguard.commands.context import load
from cni_delguard.guard import config, inject
from cni_delguard.state import marker, store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cni_delguard.commands.context import Context
    from cni_delguard.guard.config import Settings


def run(ctx: Context, data: bytes) -> bytes:
    from cni_delguard.invoke import delegate
    from cni_delguard.state.locking import AttachmentLock

    conf = config.parse_json(data)
    settings = load(ctx, conf)
    path = delegate.find(settings.delegate_type, ctx.inv.cni_path)
    key = store.attachment_key(ctx.inv.container_id, ctx.inv.ifname)
    with store.MarkerStore(
        settings.state_dir,
        settings.network,
        create=True,
        pod=ctx.pod,
        make_state_dir=settings.make_state_dir,
    ) as markers:
        lock_file = store.lock_path(settings.state_dir, settings.network, key)
        with AttachmentLock(lock_file, settings.lock_timeout, dir_fd=markers.fd) as lock:
            markers.write(key, marker.ATTEMPTED, ctx.inv.container_id, ctx.inv.ifname)
            markers.drop_release(key)  # an operator released the ADD this one replaces
            fields: dict[str, object] = {}  # the delegate's exit and time, for the log line
            try:
                result = _delegate_add(ctx, conf, settings, path, markers, key, fields)
            except errors.CniError as exc:
                cleaned = _cleanup(ctx, conf, settings, path)
                if cleaned:
                    markers.remove(key)
                    lock.remove()
                ctx.record(
                    "error",
                    settings.network,
                    decision="add-failed",
                    reason="delegate ADD failed; delegate DEL "
                    + ("succeeded, marker removed" if cleaned else "failed, marker kept"),
                    error={"code": exc.code, "msg": exc.msg},
                    **fields,
                )
                raise
            _complete(ctx, markers, key, settings, fields)
    return result


def _delegate_add(
    ctx: Context,
    conf: dict[str, Any],
    settings: Settings,
    path: str,
    markers: store.MarkerStore,
    key: str,
    fields: dict[str, object],
) -> bytes:
    """The delegate's result bytes, unchanged, once checked to be a JSON object; `fields` gets
    what its call adds to the decision's log line (failed or not: the watcher's metrics fold
    the delegate's time and failures from it)."""
    from cni_delguard.invoke import delegate

    def remember_session(pid: int) -> None:
        # So that a DEL after this guard is killed can find what the delegate left (reap.py).
        # Not fsynced: it matters after a killed guard, not after a power loss (which ends the
        # delegate's processes anyway); the attempted marker before it is durable.
        markers.write(
            key,
            marker.ATTEMPTED,
            ctx.inv.container_id,
            ctx.inv.ifname,
            durable=False,
            delegateSession=pid,
        )

    outcome = delegate.run(
        path,
        "ADD",
        inject.delegate_conf(conf, settings),
        ctx.environ,
        settings.timeouts["add"],
        on_spawn=remember_session,
    )
    fields["delegateExit"] = outcome.exit_status
    fields["delegateMs"] = round(outcome.duration_ms, 1)
    if not outcome.ok:
        raise delegate.error_from(outcome, settings.delegate_type, "ADD")
    try:
        result = jsonlite.loads(outcome.stdout)
    except ValueError:
        result = None
    if not isinstance(result, dict):
        raise errors.CniError(
            errors.DELEGATE_BAD_OUTPUT,
            f"delegate {settings.delegate_type} succeeded on ADD but printed no JSON result",
            outcome.stdout[:512].decode("utf-8", "replace"),
        )
    return outcome.stdout


def _cleanup(ctx: Context, conf: dict[str, Any], settings: Settings, path: str) -> bool:
    """Run the delegate's DEL after a failed ADD; True when it succeeded."""
    from cni_delguard.invoke import delegate

    try:
        outcome = delegate.run(
            path,
            "DEL",
            inject.delegate_conf(conf, settings, False),
            ctx.environ,
            settings.timeouts["del"],
        )
    except errors.CniError:
        return False
    return outcome.ok


def _complete(
    ctx: Context,
    markers: store.MarkerStore,
    key: str,
    settings: Settings,
    fields: dict[str, object],
) -> None:
    """Record completion. If that write fails the ADD still stands: the attempted marker and
    libcni's result cache remain evidence, so a later DEL is still forwarded.

    Not fsynced (two fsyncs are ~3 ms of every pod start here): should a power loss take it,
    the durable attempted marker is what remains, and the DEL is still forwarded (leniently,
    unless libcni's cache or prevResult make it strict)."""
    try:
        markers.write(key, marker.COMPLETED, ctx.inv.container_id, ctx.inv.ifname, durable=False)
    except errors.CniError as exc:
        ctx.record(
            "warning",
            settings.network,
            decision="add-completed",
            reason=f"delegate ADD succeeded; {exc.msg}",
            **fields,
        )
        return
    ctx.record(
        "info",
        settings.network,
        decision="add-completed",
        reason="delegate ADD succeeded, completed marker recorded",
        **fields,
    )
