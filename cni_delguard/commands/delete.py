"""DEL: answer at once when nothing was ever added, forward otherwise (decision table: decide.py).

The fast path runs on every stale DEL of a kubelet retry storm: parse stdin leniently, a few
stat() calls, one log line. It imports neither pydantic nor filelock and takes no lock: with no
marker and no lock file there is no ADD in flight for this attachment to race with (ADD creates
its lock file before its marker, and its marker before the delegate runs).

In observe mode (`"mode": "observe"`) every DEL is forwarded and its outcome returned as if the
guard were not there; the log line says what the guard would have decided (`wouldDecide`).
"""

from __future__ import annotations

from cni_delguard.cni import errors
from cni_delguard.commands.context import decision_fields, gather, load
from cni_delguard.guard import config, decide, evidence
from cni_delguard.guard.defaults import OBSERVE
from cni_delguard.guard.log import Logger
from cni_delguard.state import marker, store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from cni_delguard.commands.context import Context
    from cni_delguard.guard.config import Settings
    from cni_delguard.state.locking import AttachmentLock


def run(ctx: Context, data: bytes) -> bytes:
    conf, conf_error = _parse(data)
    dflt = ctx.defaults or config.Defaults()
    peek = config.Peek(conf, dflt=dflt)
    # A logFile the path rule refuses fails ADD; a DEL still succeeds when it would have, and
    # its record goes to the default log, saying what was refused.
    ctx.log = Logger(
        peek.log_file, peek.log_level, ctx.inv.cni_path, fallback=dflt.log_file,
        builtin=dflt.log_file,
    )
    ev = evidence.gather(peek, ctx.inv.container_id, ctx.inv.ifname, peek.prev_result)
    first, reason = decide.decide_del(ev)
    if not ev.needs_lock() and not peek.observe:
        ctx.record("info", peek.network, **decision_fields(ev, first, reason))
        return b""
    try:
        if conf_error is not None:
            raise conf_error
        settings = load(ctx, conf)
        if settings.mode == OBSERVE:
            return _observed(ctx, conf, settings)
        return _locked(ctx, conf, settings)
    except _DecisionError as failed:
        exc = failed.error
        ctx.record("error", peek.network, **failed.fields, error={"code": exc.code, "msg": exc.msg})
        raise exc from None
    except errors.CniError as exc:
        if first == decide.SKIP and not peek.observe and exc.code != errors.TRY_AGAIN_LATER:
            # Only a lock file was left (a killed operation), and the config or state dir is
            # unusable: still nothing to delete, so removal must not be blocked. (A lock that is
            # held, though, is an operation in flight: the runtime is told to try again.)
            why = f"{reason}; lock file left in place ({exc.msg})"
            ctx.record("warning", peek.network, **decision_fields(ev, first, why))
            return b""
        fields = decision_fields(ev, "error", "DEL could not be carried out")
        ctx.record("error", peek.network, **fields, error={"code": exc.code, "msg": exc.msg})
        raise


class _DecisionError(Exception):
    """A DEL that failed after its decision: the error, with that decision's log fields."""

    def __init__(self, error: errors.CniError, fields: dict[str, object]) -> None:
        super().__init__(error.msg)
        self.error = error
        self.fields = fields


def _parse(data: bytes) -> tuple[dict[str, Any], errors.CniError | None]:
    try:
        return config.parse_json(data), None
    except errors.CniError as exc:
        return {}, exc


def _locked(ctx: Context, conf: dict[str, Any], settings: Settings) -> bytes:
    """Decide again under the attachment's lock, act, and clean up what is no longer needed."""

    def act(held: _Held, ev: decide.Evidence) -> bytes:
        decision, reason = decide.decide_del(ev)
        # This decision's log fields: filled in on the way, logged once at the end.
        fields = held.fields = decision_fields(ev, decision, reason)
        try:
            if decision == decide.FORWARD_LENIENT:
                _reap(ctx, held.markers, held.key, fields)
            if decision != decide.SKIP:
                with _Release(held.markers, held.key, fields):
                    _forward_recorded(ctx, conf, settings, decision, fields, held)
        except errors.CniError as exc:
            raise _DecisionError(exc, fields) from None
        try:
            held.markers.remove(held.key)
            held.lock.remove()
        except OSError as exc:
            # The DEL itself is done; a state dir that went read-only (or broke) only
            # keeps the marker, and the next DEL is forwarded again. Never fail for that.
            fields["warning"] = f"marker not removed: {exc}"
        if "warning" in fields or fields["decision"] == decide.RELEASED:  # a leak on purpose
            held.level = "warning"
        return b""

    return _under_lock(ctx, conf, settings, act)


def _observed(ctx: Context, conf: dict[str, Any], settings: Settings) -> bytes:
    """Observe mode: forward under the lock, return the delegate's output or raise its error
    unchanged; log the decision the guard would have made. The marker goes only when the DEL
    succeeded (as in enforcing mode); a lock file the guard made for nothing goes too."""

    def act(held: _Held, ev: decide.Evidence) -> bytes:
        would, why = decide.decide_del(ev)
        fields = held.fields = decision_fields(ev, "observe", f"observe mode: forwarded; {why}")
        fields["wouldDecide"] = would
        try:
            out = _call_delegate(ctx, conf, settings, fields)
        except errors.CniError as exc:
            # The guard would have answered success (skip, or a lenient forward): the
            # runtime got this failure only because the guard was observing.
            fields["wouldFree"] = would in (decide.SKIP, decide.FORWARD_LENIENT)
            if ev.marker is None:
                _quietly(held.lock.remove)
            raise _DecisionError(exc, fields) from None
        _quietly(lambda: held.markers.remove(held.key))
        _quietly(held.lock.remove)
        return out

    return _under_lock(ctx, conf, settings, act)


class _Held:
    """What a DEL holds while it acts: the network's markers, the attachment's lock, and the
    decision's log fields and level (logged once, after the lock is let go)."""

    def __init__(self, markers: store.MarkerStore, lock: AttachmentLock, key: str) -> None:
        self.markers = markers
        self.lock = lock
        self.key = key
        self.fields: dict[str, object] = {}
        self.level = "info"


def _under_lock(
    ctx: Context,
    conf: dict[str, Any],
    settings: Settings,
    act: Callable[[_Held, decide.Evidence], bytes],
) -> bytes:
    from cni_delguard.state.locking import AttachmentLock

    key = store.attachment_key(ctx.inv.container_id, ctx.inv.ifname)
    lock_file = store.lock_path(settings.state_dir, settings.network, key)
    with (
        store.MarkerStore(
            settings.state_dir,
            settings.network,
            create=True,
            pod=ctx.pod,
            make_state_dir=settings.make_state_dir,
        ) as m,
        AttachmentLock(lock_file, settings.lock_timeout, dir_fd=m.fd) as lock,
    ):
        held = _Held(m, lock, key)
        out = act(held, gather(ctx, settings, conf))
    ctx.record(held.level, settings.network, **held.fields)
    return out


def _quietly(action: Callable[[], object]) -> None:
    try:
        action()
    except OSError:
        return  # the DEL's outcome is the delegate's; a leftover file only costs a forward


class _Release:
    """Around a strict forward: when an operator released the attachment (ops/release.py), a
    delegate failure (or timeout) is logged with the operator's reason and the DEL succeeds.
    The delegate still got its DEL; the record goes with the marker (store.remove). A record
    that is not root's own (store.MarkerStore.release) is ignored with a warning: the DEL stays
    strict."""

    def __init__(self, markers: store.MarkerStore, key: str, fields: dict[str, object]) -> None:
        self.fields = fields
        strict = fields["decision"] == decide.FORWARD_STRICT
        self.record = markers.release(key) if strict else None
        if self.record is not None and self.record.refused is not None:
            fields["warning"] = f"release record ignored: {self.record.refused}"
            self.record = None

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> bool:
        if self.record is None or not isinstance(exc, errors.CniError):
            return False
        given = self.record.logged()
        self.fields["decision"] = decide.RELEASED
        self.fields["reason"] = (
            f"{self.fields['reason']}; released by an operator ({given['reason']}): "
            "the delegate failed, DEL reported as success, its state is left behind"
        )
        self.fields["release"] = given
        self.fields["delegateError"] = {"code": exc.code, "msg": exc.msg}
        return True


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
    held: _Held,
) -> None:
    """_forward, with a `deleting` marker on disk while the delegate runs: a guard killed then
    leaves a record that the next DEL reads as "failures are ignored" (decide.py). A DEL that
    fails and is reported puts the marker back as it was.

    The delegate's error is what the runtime gets, whatever happens to the guard's own
    bookkeeping after it: a marker that cannot be put back (a full or read-only state fs) is
    logged, never reported in its place. The next DEL still sees evidence: the old marker when
    the `deleting` one could not be written either (the usual case on such a fs), else the
    `deleting` one, which forwards the DEL again (leniently).

    A strict DEL of an attachment the guard holds no marker for (an ADD from before the guard
    was installed: only libcni's cache or prevResult says it completed) puts a `completed`
    marker in its place when it fails, `adopted` naming that evidence: the next DEL is strict
    as before, and `release`, which works from markers, can now free it (doctor prints the
    command for every strict DEL that keeps failing)."""
    markers, key = held.markers, held.key
    prior = markers.body(key)
    if not prior and decision == decide.FORWARD_STRICT:
        prior = adopted(markers, ctx, fields)
    try:
        # Not fsynced: it is for a guard killed mid-DEL; after a power loss the delegate's
        # runtime state is gone as well.
        markers.write(key, marker.DELETING, ctx.inv.container_id, ctx.inv.ifname, durable=False)
        changed = True
    except errors.CniError as exc:
        fields["warning"] = exc.msg  # only the crash window loses its record; go on
        changed = False
    try:
        _forward(ctx, conf, settings, decision, fields)
    except errors.CniError:
        if changed:
            try:
                markers.restore(key, prior)
            except (errors.CniError, OSError) as exc:
                fields["warning"] = f"marker not put back: {getattr(exc, 'msg', exc)}"
        raise


def adopted(
    markers: store.MarkerStore, ctx: Context, fields: dict[str, object]
) -> dict[str, object]:
    """The `completed` marker a failed strict DEL leaves for an ADD the guard never saw."""
    found = fields.get("evidence")
    # The lock file is no sign of an ADD (decide.decide_del): only the rest is named.
    why = [name for name in found if name != "lock"] if isinstance(found, list) else []
    return markers.new_body(marker.COMPLETED, ctx.inv.container_id, ctx.inv.ifname, adopted=why)


def _call_delegate(
    ctx: Context, conf: dict[str, Any], settings: Settings, fields: dict[str, object]
) -> bytes:
    """The delegate's DEL: its stdout on success, its error (a missing delegate's included)
    on failure. What a failure means is the caller's to decide."""
    from cni_delguard.guard import inject
    from cni_delguard.invoke import delegate

    fields["delegateExit"] = None
    path = delegate.find(settings.delegate_type, ctx.inv.cni_path)
    outcome = delegate.run(
        path, "DEL", inject.delegate_conf(conf, settings), ctx.environ, settings.timeouts["del"]
    )
    fields["delegateExit"] = outcome.exit_status
    fields["delegateMs"] = round(outcome.duration_ms, 1)
    if not outcome.ok:
        raise delegate.error_from(outcome, settings.delegate_type, "DEL")
    return outcome.stdout


def _forward(
    ctx: Context, conf: dict[str, Any], settings: Settings, decision: str, fields: dict[str, object]
) -> None:
    """Run the delegate's DEL; a lenient failure is logged, a strict one raised."""
    try:
        _call_delegate(ctx, conf, settings, fields)
    except errors.CniError as failure:
        if decision != decide.FORWARD_LENIENT:
            raise
        fields["delegateError"] = {"code": failure.code, "msg": failure.msg}
        fields["reason"] = f"{fields['reason']}; the delegate failed, DEL reported as success"
