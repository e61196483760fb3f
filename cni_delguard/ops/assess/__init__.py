"""`cni-delguard assess`: does the guard fix anything on this node? Read-only, runs nothing.

It takes the node's runtime version and reads what sits behind the guard, and looks up what the
matrix of record measured there, as this build ships it (verdicts.json, worked out by
delguard_build when the pages are rendered), or says "unmeasured". Exit 0 whatever it finds; 2,
with one line, only when it cannot read the node (or the verdicts). `examine()` is the way in
for code; `summary_line()` is what the installer logs at start.

| module | job |
| --- | --- |
| `chains.py` | kinds of chain behind the guard, one row each, and the chains that measured them |
| `verdicts.py` | the shipped verdicts, and the runtime ranges they are given for |
| `probe.py` | the reading of the node: what sits behind the guard, the runtime's version |
| `report.py` | what was found, the assessment, its text, its JSON, its one-line summary |
"""

from __future__ import annotations

import os

from cni_delguard.host import dirs, layouts
from cni_delguard.node import options
from cni_delguard.ops.assess import probe, report, verdicts
from cni_delguard.ops.doctor.node import discover
from cni_delguard.ops.text import as_json, clean
from cni_delguard.tooling import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, TextIO

SUMMARY = "say what the guard fixes on this node, from the matrix (read-only)"
DESCRIPTION = ("Take the node's runtime version and read what sits behind the guard, then say "
               "what the matrix this build ships measured there: which stale sandboxes stick "
               "without the guard, which it frees, which it does not (`cni-delguard release` "
               "frees those), or that it is unmeasured. Reads files only: changes nothing, "
               "runs no program. Exit 0, or 2 when the node cannot be read.")


class UnreadableError(Exception):
    """The node (or the shipped verdicts) cannot be read: exit 2 with this line."""


def register(sub: Any) -> None:
    """Add `assess` to cni_delguard.cli's subcommands."""
    parser = options.command(sub, "assess", run, SUMMARY, DESCRIPTION)
    options.add(parser, "root")
    layouts.add_option(parser)
    options.add(parser, "conf_dir", "bin_dir")
    parser.add_argument("--runtime", type=_checked(probe.given), metavar="NAME://VERSION",
                        help="the node's runtime as the kubelet reports it (`kubectl get node "
                        "NODE -o wide`, CONTAINER-RUNTIME: containerd://2.1.6); default: its "
                        "Debian package's version under --root, else unmeasured")
    parser.add_argument("--multus-version", type=_checked(probe.multus_version), metavar="VERSION",
                        help="multus's version (its image's tag, e.g. v4.3.0); default: unknown")
    parser.add_argument("--output", choices=("text", "json"), default="text",
                        help="text for people (the default), json for fleets (one document, "
                        f"`schema` {report.SCHEMA})")


def _checked(check: Any) -> Any:
    """An argparse type that keeps the value as given once `check` accepts it."""
    import argparse

    def checked(value: str) -> str:
        try:
            check(value)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    return checked


def examine(root: str = "/", layout: str = layouts.AUTO, conf_dir: str | None = None,
            bin_dir: str | None = None, runtime: str | None = None,
            multus_version: str | None = None) -> report.Assessment:
    """Assess the node under `root` (UnreadableError when it cannot be read). `conf_dir`,
    `bin_dir`: as the node names them (default: the layout's, or its runtime config's);
    `runtime`: as the kubelet reports it (NAME://VERSION; default: its package's);
    `multus_version`: as the user gives it (default: unknown)."""
    if not os.path.isdir(root):
        raise UnreadableError(f"--root {clean(root)} is not a directory")
    try:  # no layout's conf found: the standard one (doctor's rule)
        found_dirs = dirs.find(root, layout, conf_dir=conf_dir, bin_dir=bin_dir,
                               standard_when_none=True)
        node = discover(found_dirs)
        if os.path.exists(node.conf_dir):  # missing: a node without a conf; unlistable: unread
            os.listdir(node.conf_dir)
        shipped = verdicts.shipped()
        given = probe.given(runtime) if runtime is not None else None
        multus = probe.multus_version(multus_version) if multus_version is not None else None
    except (UsageError, OSError, ValueError) as exc:  # ValueError: verdicts.VerdictsError, JSON
        raise UnreadableError(clean(exc)) from None
    found = report.Found(root, found_dirs.layout.name, node.conf_dir, node.bin_dir)
    found.runtime = given or probe.packaged(found_dirs.root, found.tried)
    probe.behind(node, found, multus)
    return report.assessment(found, shipped)


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        seen = examine(args.root, args.layout, args.conf_dir, args.bin_dir, args.runtime,
                       args.multus_version)
    except UnreadableError as exc:
        stderr.write(f"cni-delguard assess: cannot read the node: {exc}\n")
        return 2
    if args.output == "json":
        stdout.write(as_json(seen.as_json()))
    else:
        stdout.write("\n".join(clean(line) for line in seen.text()) + "\n")
    return 0


def summary_line(root: str, layout: str) -> str:
    """What the installer logs at start: assess's summary, or why there is none (never raises:
    the installer goes on whatever assess finds)."""
    try:
        return clean(examine(root, layout).summary())
    except UnreadableError as exc:
        return f"cannot read the node: {exc}"
    except Exception as exc:  # noqa: BLE001 - a report, never a reason to stop installing
        return f"failed: {clean(repr(exc))[:300]}"
