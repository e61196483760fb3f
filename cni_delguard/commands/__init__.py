"""The CNI commands, one module each, dispatched from one table.

Each module has `run(ctx, data) -> bytes`: the validated invocation and the raw stdin in, the
bytes for stdout out, `CniError` for anything the runtime must see as a failure. A command's
module is imported only when that command runs, so a DEL never pays for ADD's imports.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from cni_delguard.commands.context import Context

# CNI_COMMAND -> module under cni_delguard.commands. VERSION needs no stdin and no context:
# cli.py answers it from commands/version.py before anything else is read.
COMMANDS = {
    "ADD": "add",
    "DEL": "delete",
    "CHECK": "check",
    "GC": "collect",
    "STATUS": "status",
}


def dispatch(ctx: Context, data: bytes) -> bytes:
    # __import__ with a fromlist returns the submodule itself; importlib is not loaded at
    # start-up and importing it would cost every exec.
    module = __import__(f"{__name__}.{COMMANDS[ctx.inv.command]}", fromlist=["run"])
    run: Callable[[Context, bytes], bytes] = module.run
    return run(ctx, data)
