"""DEL: answer at once when nothing was ever added, forward otherwise (decision table: decide.py).

The fast path runs on every stale DEL of a kubelet retry storm: parse stdin leniently, a few
stat() calls, one log line. It imports neither pydantic nor filelock and takes no lock: with no
marker and no lock file there is no ADD in flight for this attachment to race with (ADD creates
its lock file before its marker, and its marker before the delegate runs).
"""

from __future__ import annotations

from cni_delguard.cni import errors
from cni_delguard.commands.context import decision_fields, gather, load
from cni_delguard.guard import config, decide, evidence, inject
from cni_delguard.guard.log import Logger
from cni_delguard.state import marker, store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cni_delguard.commands.context import Context
    from cni_delguard.guard.config import Settings


def run(ctx: Context, data: bytes) -> bytes:
    conf, conf_error = _parse(data)
    peek = config.Peek(conf, dflt=ctx.defaults)
    ctx.log = Logger(peek.log_file, peek.log_level)
    ev = evidence.gather(peek, ctx.inv.container_id, ctx.inv.ifname, peek.prev_result)
    first, reason = decide.decide_del(ev)
    if not ev.needs_lock():
        ctx.record("info", peek.network, **decision_fields(ev, first, reason))
        return b""
    try:
        if conf_error is not None:
            raise conf_error
        settings = load(ctx, conf)
        return _locked(ctx, conf, settings)
    except errors.CniError as exc:
        if first == decide.SKIP and exc.code != errors.TRY_AGAIN_LATER:
            # Only a lock file was left (a killed operation), and the config or state dir is
            # unusable: still nothing to delete, so removal must not be blocked. (A lock that is
            # held, though, is an operation in flight: the runtime is told to try again.)
            why = f"{reason}; lock file left in place ({exc.msg})"
            ctx.record("warning", peek.network, **decision_fields(ev, first, why))
            return b""
        fields = ctx.fields or decision_fields(ev, "error", "DEL could not be carried out")
        ctx.record("error", peek.network, **fields, error={"code": exc.code, "msg": exc.msg})
        raise


def _parse(data: bytes) -> tuple[dict[str, Any], errors.CniError | None]:
    try:
        return config.parse_json(data), None
    except errors.CniError as exc:
        return {}, exc


def _locked(ctx: Context, conf: dict[str, Any], settings: Settings) -> bytes:
    """Decide again under the attachment's lock, act, and clean up what is no longer needed."""
    from cni_delguard.state.locking import AttachmentLock

    key = store.attachment_key(ctx.inv.container_id, ctx.inv.ifname)
    with store.MarkerStore(settings.state_dir, settings.network, create=True) as markers:
        lock_file = store.lock_path(settings.state_dir, settings.network, key)
        with AttachmentLock(lock_file, settings.lock_timeout) as lock:
            ev = gather(ctx, settings, conf)
            decision, reason = decide.decide_del(ev)
            fields = ctx.fields = decision_fields(ev, decision, reason)
            if decision == decide.FORWARD_LENIENT:
                _reap(ctx, markers, key, fields)
            if decision != decide.SKIP:
                _forward_recorded(ctx, conf, settings, decision, fields, markers, key)
            try:
                markers.remove(key)
                lock.remove()
            except OSError as exc:
                # The DEL itself is done; a state dir that went read-only (or broke) only
                # keeps the marker, and the next DEL is forwarded again. Never fail for that.
                fields["warning"] = f"marker not removed: {exc}"
    ctx.record("warning" if "warning" in fields else "info", settings.network, **fields)
    return b""


def _reap(ctx: Context, markers: store.MarkerStore, key: str, fields: dict[str, object]) -> None:
    """Kill what a killed guard's ADD left running, before its DEL is forwarded (reap.py)."""
    session = markers.body(key).get("delegateSession")
    if isinstance(session, int) and not isinstance(session, bool) and session > 1:
        from cni_delguard.invoke import reap

        fields["orphansKilled"] = reap.kill_orphans(session, ctx.inv.container_id, ctx.inv.ifname)


def _forward_recorded(
    ctx: Context,
    conf: dict[str, Any],
    settings: Settings,
    decision: str,
    fields: dict[str, object],
    markers: store.MarkerStore,
    key: str,
) -> None:
    """_forward, with a `deleting` marker on disk while the delegate runs: a guard killed then
    leaves a record that the next DEL reads as "failures are ignored" (decide.py). A DEL that
    fails and is reported puts the marker back as it was."""
    prior = markers.body(key)
    try:
        # Not fsynced: it is for a guard killed mid-DEL; after a power loss the delegate's
        # runtime state is gone as well.
        markers.write(key, marker.DELETING, ctx.inv.container_id, ctx.inv.ifname, durable=False)
    except errors.CniError as exc:
        fields["warning"] = exc.msg  # only the crash window loses its record; go on
    try:
        _forward(ctx, conf, settings, decision, fields)
    except errors.CniError:
        markers.restore(key, prior)
        raise


def _forward(
    ctx: Context, conf: dict[str, Any], settings: Settings, decision: str, fields: dict[str, object]
) -> None:
    """Run the delegate's DEL; a lenient failure is logged, a strict one raised."""
    from cni_delguard.invoke import delegate

    try:
        path = delegate.find(settings.delegate_type, ctx.inv.cni_path)
        outcome = delegate.run(
            path, "DEL", inject.delegate_conf(conf, settings), ctx.environ, settings.timeouts["del"]
        )
    except errors.CniError as exc:
        failure: errors.CniError | None = exc
        fields["delegateExit"] = None
    else:
        fields["delegateExit"] = outcome.exit_status
        fields["delegateMs"] = round(outcome.duration_ms, 1)
        failure = (
            None if outcome.ok else delegate.error_from(outcome, settings.delegate_type, "DEL")
        )
    if failure is None:
        return
    if decision == decide.FORWARD_LENIENT:
        fields["delegateError"] = {"code": failure.code, "msg": failure.msg}
        fields["reason"] = f"{fields['reason']}; the delegate failed, DEL reported as success"
        return
    raise failure
