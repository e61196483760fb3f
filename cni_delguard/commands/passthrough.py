"""What CHECK, GC and STATUS share: run the delegate's same command and log the outcome.

The guard adds nothing to these commands' answers: the delegate's own error reaches the runtime
unchanged, and success prints nothing (none of the three has a result body).
"""

from __future__ import annotations

from cni_delguard.cni import errors
from cni_delguard.commands.context import load, require_version
from cni_delguard.guard import config, inject

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cni_delguard.commands.context import Context
    from cni_delguard.guard.config import Settings


def prepare(ctx: Context, data: bytes, since: str) -> tuple[dict[str, Any], Settings]:
    """The config and the validated settings; code 1 for a config version before `since`."""
    conf = config.parse_json(data)
    settings = load(ctx, conf)
    require_version(settings, since, ctx.inv.command)
    return conf, settings


def call_logged(
    ctx: Context, conf: dict[str, Any], settings: Settings, path: str, **extra: object
) -> None:
    """Run the delegate's `ctx.inv.command` and log one line with `extra` and its outcome."""
    from cni_delguard.invoke import delegate

    command = ctx.inv.command
    fields: dict[str, object] = dict(extra)
    try:
        outcome = delegate.run(
            path,
            command,
            inject.delegate_conf(conf, settings),
            ctx.environ,
            settings.timeouts[command.lower()],
        )
        fields["delegateExit"] = outcome.exit_status
        fields["delegateMs"] = round(outcome.duration_ms, 1)
        if not outcome.ok:
            raise delegate.error_from(outcome, settings.delegate_type, command)
    except errors.CniError as exc:
        ctx.record(
            "error",
            settings.network,
            decision="forward",
            reason="delegate failed",
            error={"code": exc.code, "msg": exc.msg},
            **fields,
        )
        raise
    level = "warning" if "warning" in fields else "info"
    ctx.record(level, settings.network, decision="forward", reason="delegate succeeded", **fields)
