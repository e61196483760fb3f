"""The command-line options every operator command shares, each defined once (name, default,
help), so `install`, `doctor`, `list`, `release` and `stats` agree. The path options default to
None: the node's layout (host/layouts.py, `--layout`) gives the value; host/dirs.py resolves
them all, through `--root`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cni_delguard.guard import defaults

_OPTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "root": (
        "--root",
        {
            "default": "/",
            "metavar": "DIR",
            "help": "where the node's / is mounted; paths below are taken under it (%(default)s)",
        },
    ),
    "bin_dir": (
        "--bin-dir",
        {"default": None, "metavar": "DIR", "help": "CNI bin dir (the layout's: /opt/cni/bin)"},
    ),
    "conf_dir": (
        "--conf-dir",
        {"default": None, "metavar": "DIR", "help": "CNI conf dir (the layout's: /etc/cni/net.d)"},
    ),
    "state_dir": (
        "--state-dir",
        {
            "default": None,
            "metavar": "DIR",
            "help": f"the guard's stateDir (the layout's: {defaults.STATE_DIR})",
        },
    ),
    "log_file": (
        "--log-file",
        {
            "default": None,
            "metavar": "FILE",
            "help": f"the guard's decision log (the layout's: {defaults.LOG_FILE})",
        },
    ),
    "json": ("--json", {"action": "store_true", "help": "print JSON, for machines"}),
}


def add(parser: Any, *names: str, **changes: dict[str, Any]) -> None:
    """Add the named options to `parser`; `changes` adjusts one option's settings by name."""
    for name in names:
        flag, settings = _OPTIONS[name]
        parser.add_argument(flag, **{**settings, **changes.get(name, {})})


def command(sub: Any, name: str, run: Callable[..., int], summary: str, description: str) -> Any:
    """A subcommand: `summary` in the top-level help, `description` in its own `--help`."""
    parser = sub.add_parser(name, help=summary, description=description)
    parser.set_defaults(run=run)
    return parser
