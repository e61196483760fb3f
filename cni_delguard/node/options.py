"""Where things are on a node: the command-line options every operator command shares, each
defined once (name, default, help), so `install`, `doctor`, `list`, `release` and `stats` agree;
`under`, the one way a path of the node (from a flag or a conf) is reached through `--root`; and
`located`, the same with the node's own symlinks followed as the node follows them.

The path options default to None: the node's layout (layouts.py, `--layout`) gives the value.
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


_MAX_LINKS = 40  # as the kernel's path walk (ELOOP past 40 links)


def located(root: str, path: str) -> str:
    """`path` under `root` (as `under`), with the node's own symlinks followed as the node
    follows them: a link's absolute target is taken under the root, as a chroot takes it, and
    `..` stops at the root. A plain join would let the kernel follow such a link out of the
    root: k3s's data/current points at the running release by its absolute host path, which
    from a container that sees the host at /host names nothing (or, from a copy of a node on
    another machine, that machine's own dir). A missing component and what follows it are
    joined as they are. With / as the root the kernel's own walk is the node's: the plain join.
    UsageError for a loop of links."""
    joined = under(root, path)
    if os.path.abspath(root) == "/":
        return joined
    base = os.path.abspath(root)
    todo = [p for p in absolute(path).split("/") if p]
    done: list[str] = []
    links = 0
    while todo:
        part = todo.pop(0)
        if part in (".", ".."):
            if part == ".." and done:
                done.pop()
            continue
        try:
            target = os.readlink(os.path.join(base, *done, part))
        except OSError:  # not a link, or not there: taken as it is
            done.append(part)
            continue
        links += 1
        if links > _MAX_LINKS:
            raise UsageError(f"{path}: too many levels of symbolic links under --root {root}")
        if target.startswith("/"):
            done = []
        todo = [p for p in target.split("/") if p] + todo
    return os.path.join(base, *done)
