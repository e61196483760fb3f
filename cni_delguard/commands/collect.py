"""GC (spec 1.1.0): prune the guard's own markers of attachments the runtime no longer lists as
valid (guard/prune.py), then forward GC to the delegate."""

from __future__ import annotations

from cni_delguard.commands import passthrough
from cni_delguard.guard import inject

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cni_delguard.commands.context import Context


def run(ctx: Context, data: bytes) -> bytes:
    from cni_delguard.guard import prune
    from cni_delguard.invoke import delegate

    conf, settings = passthrough.prepare(ctx, data, since="1.1.0")
    valid = conf.get(inject.VALID_ATTACHMENTS)
    # Without the list, nothing is pruned: the runtime has not said what is still in use.
    pruned, skipped = prune.prune(settings, valid) if valid is not None else ([], None)
    path = delegate.find(settings.delegate_type, ctx.inv.cni_path)
    extra: dict[str, object] = {"pruned": pruned}
    if skipped is not None:  # the delegate's GC matters more than our markers: forwarded still
        extra["warning"] = f"markers not pruned: {skipped}"
    passthrough.call_logged(ctx, conf, settings, path, **extra)
    return b""
