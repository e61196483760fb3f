"""`cni-delguard list`: the guard's markers on this node (network, container, ifname, state,
age, pod), as a table or JSON."""

from __future__ import annotations

from cni_delguard.cni import errors
from cni_delguard.host import layouts
from cni_delguard.node import options
from cni_delguard.ops import scan
from cni_delguard.ops.text import age, as_json, clean
from cni_delguard.tooling import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, TextIO

COLUMNS = ("NETWORK", "CONTAINER", "IFNAME", "STATE", "AGE", "POD")


SUMMARY = "list the guard's markers on this node"
DESCRIPTION = (
    "The guard's markers: one per attachment whose ADD it has seen and whose "
    "DEL has not yet succeeded."
)


def register(sub: Any) -> None:
    """Add `list` to cni_delguard.cli's subcommands."""
    parser = options.command(sub, "list", run, SUMMARY, DESCRIPTION)
    options.add(parser, "root")
    layouts.add_option(parser)
    options.add(parser, "state_dir", "json")


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    now = scan.now()
    try:
        state_dir = layouts.guard_path(args, "state_dir")
    except UsageError as exc:
        stderr.write(f"cni-delguard list: {clean(exc)}\n")
        return 2
    try:
        found = scan.markers(state_dir)
    except FileNotFoundError:
        found = []  # no state dir yet: the guard has seen no ADD
    except (OSError, errors.CniError) as exc:
        msg = exc.msg if isinstance(exc, errors.CniError) else str(exc)
        stderr.write(f"cni-delguard list: {clean(msg)}\n")
        return 2
    if args.json:
        stdout.write(as_json([m.as_dict(now) for m in found]))
        return 0
    rows: list[tuple[str, ...]] = [COLUMNS]
    rows += [
        (m.network, m.container_id, m.ifname, m.state, age(m.age(now)), m.pod_name() or "-")
        for m in found
    ]
    rows = [tuple(clean(c) for c in row) for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    for row in rows:
        stdout.write(
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n"
        )
    if not found:
        stdout.write(f"no markers in {clean(state_dir)}\n")
    return 0
