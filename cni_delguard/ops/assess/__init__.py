"""`cni-delguard assess`: does the guard fix anything on this node? Read-only.

It finds the node's runtime and version and what sits behind the guard (probe.py), places them
in a runtime range and a kind of chain, and says what the matrix of record (matrix.json here,
the file README.md and docs/compatibility.md render) measured there: which stale sandboxes stick
without the guard, which the guard frees, which it does not (and the release valve for those).
A node the matrix never measured is "unmeasured". Exit 0 whatever it finds; 2, with one line,
only when it cannot read the node (or the matrix). The modules, each with one job:

| module | job |
| --- | --- |
| `matrix.py` | the matrix: rows, vocabularies, the file's shape, the packaged file of record |
| `ranges.py` | runtime version ranges, one row each (the containerd boundary) |
| `chains.py` | kinds of chain behind the guard, one row each, and the chains that measured them |
| `verdict.py` | the derivation: one range and one chain -> what sticks, what is freed |
| `render.py` | the Markdown of README's and docs/compatibility.md's tables |
| `cri.py` | the CRI Version call over the runtime's socket |
| `facts.py`, `probe.py` | what was found on the node; the reading of it |
| `report.py` | the assessment, its text, its JSON, its one-line summary |

`examine(...)` is the way in for code (the e2e suites); `summary_line` is what the installer
logs at start.
"""

from __future__ import annotations

import os

from cni_delguard.host import dirs, layouts
from cni_delguard.node import options
from cni_delguard.ops.assess import matrix, probe, report
from cni_delguard.ops.assess.facts import Found
from cni_delguard.ops.doctor.node import discover
from cni_delguard.ops.text import as_json, clean
from cni_delguard.tooling import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, TextIO

SUMMARY = "say what the guard fixes on this node, from the matrix (read-only)"
DESCRIPTION = (
    "Find the node's runtime and version and what sits behind the guard (multus thin or thick, "
    "how multus is given its network, the delegates), then say what the matrix this build "
    "ships measured there: which stale sandboxes stick without the guard, which it frees, "
    "which it does not (`cni-delguard release` frees those). A node the matrix never measured "
    "is unmeasured. Changes nothing. Exit 0, or 2 when the node cannot be read."
)


class UnreadableError(Exception):
    """The node (or the matrix) cannot be read: exit 2 with this line."""


def register(sub: Any) -> None:
    """Add `assess` to cni_delguard.cli's subcommands."""
    parser = options.command(sub, "assess", run, SUMMARY, DESCRIPTION)
    options.add(parser, "root")
    layouts.add_option(parser)
    options.add(parser, "conf_dir", "bin_dir")
    parser.add_argument(
        "--runtime-endpoint",
        metavar="SOCKET",
        help="the runtime's CRI socket as seen from here (unix:///run/containerd/containerd.sock "
        "or a path); default: each known socket under --root, then the runtime's binary",
    )
    parser.add_argument(
        "--runtime",
        type=_runtime,
        metavar="NAME://VERSION",
        help="the node's runtime as the kubelet reports it (`kubectl get node NODE -o wide`, "
        "CONTAINER-RUNTIME: containerd://2.1.6), instead of looking for it: in the installer's "
        "pod, which mounts no runtime socket or binary of the node's",
    )
    parser.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="text for people (the default), json for fleets (one document, `schema` 1)",
    )


def _runtime(value: str) -> str:
    """--runtime as argparse checks it: NAME://VERSION (probe.given), else a usage error."""
    import argparse

    try:
        probe.given(value)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


class Examined:
    """An assessment and where it was made (what the text and the JSON name)."""

    def __init__(self, a: report.Assessment, root: str, layout: str, conf_dir: str,
                 bin_dir: str) -> None:
        self.assessment, self.root, self.layout = a, root, layout
        self.conf_dir, self.bin_dir = conf_dir, bin_dir

    def as_json(self) -> dict[str, Any]:
        return report.as_json(self.assessment, self.root, self.layout, self.conf_dir,
                              self.bin_dir)

    def text(self) -> list[str]:
        return report.text(self.assessment, self.root, self.layout, self.conf_dir)

    def summary(self) -> str:
        return report.summary(self.assessment)


def examine(
    root: str = "/",
    layout: str = layouts.AUTO,
    conf_dir: str | None = None,
    bin_dir: str | None = None,
    endpoint: str | None = None,
    runtime: str | None = None,
) -> Examined:
    """Assess the node under `root` (UnreadableError when it cannot be read). `conf_dir`,
    `bin_dir`: as the node names them (default: the layout's, or its runtime config's);
    `endpoint`: the runtime's CRI socket as seen from here (default: the known ones);
    `runtime`: the runtime as the kubelet reports it (NAME://VERSION), instead of looking."""
    if not os.path.isdir(root):
        raise UnreadableError(f"--root {clean(root)} is not a directory")
    try:
        found_dirs = dirs.find(root, layout, conf_dir=conf_dir, bin_dir=bin_dir,
                               standard_when_none=True)
        node = discover(found_dirs)
        _readable(node.conf_dir)
        packaged = matrix.packaged()
        given = probe.given(runtime) if runtime is not None else None
    except UsageError as exc:
        raise UnreadableError(clean(exc)) from None
    except (OSError, matrix.MatrixError) as exc:
        raise UnreadableError(clean(exc)) from None
    found = Found()
    found.runtime, found.tried = (given, []) if given else probe.runtime(root, endpoint)
    probe.behind(node, found)
    return Examined(report.assessment(found, packaged), root, found_dirs.layout.name,
                    node.conf_dir, node.bin_dir)


def _readable(conf_dir: str) -> None:
    """A conf dir that is missing is a node without a conf; one that cannot be listed is a
    node that cannot be read."""
    try:
        os.listdir(conf_dir)
    except FileNotFoundError:
        return


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        seen = examine(args.root, args.layout, args.conf_dir, args.bin_dir,
                       args.runtime_endpoint, args.runtime)
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
