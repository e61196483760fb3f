"""Where things are on a node: the command-line options every operator command shares, each
defined once (name, default, help), so `install`, `doctor`, `list`, `release` and `stats` agree.
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
        {"default": "/opt/cni/bin", "metavar": "DIR", "help": "CNI bin dir (%(default)s)"},
    ),
    "conf_dir": (
        "--conf-dir",
        {"default": "/etc/cni/net.d", "metavar": "DIR", "help": "CNI conf dir (%(default)s)"},
    ),
    "state_dir": (
        "--state-dir",
        {
            "default": defaults.STATE_DIR,
            "metavar": "DIR",
            "help": "the guard's stateDir (%(default)s)",
        },
    ),
    "log_file": (
        "--log-file",
        {
            "default": defaults.LOG_FILE,
            "metavar": "FILE",
            "help": "the guard's decision log (%(default)s)",
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
