"""Where things are on a node: the command-line options every operator command shares, each
defined once (name, default, help), so `install`, `doctor`, `list`, `release` and `stats` agree;
and `under`, the one way a path of the node (from a flag or a conf) is reached through `--root`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from cni_delguard.guard import defaults
from cni_delguard.tooling import UsageError

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


def absolute(path: str) -> str:
    """A path as the node names it, normalized as the guard reads its config (`/../var/lib` is
    `/var/lib`: `..` stops at /); UsageError when it is not absolute or holds a NUL."""
    if not path.startswith("/") or "\0" in path:
        raise UsageError(f"{path!r} must be an absolute path")
    return os.path.normpath(path)


def under(root: str, path: str) -> str:
    """`path` (absolute, as the node names it) reached through `root`. Normalized before it is
    joined, so no `..` climbs out of the root (joining first made `/../var/lib` under R into
    R/../var/lib, beside R); a result that is still not under the root is refused (UsageError).
    Symlinks inside the root are not resolved here: the node's own layout is trusted."""
    base = os.path.abspath(root)
    joined = os.path.normpath(os.path.join(base, absolute(path).lstrip("/")))
    if os.path.commonpath([base, joined]) != base:
        raise UsageError(f"{path} is not under --root {root}")
    return joined
