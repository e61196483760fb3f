"""The node's dirs, resolved once for every command: layout + the runtime's config + overrides.

Which layout (layouts.choose: named, or `auto`, found under the root), then the conf dir and
bin dir the runtime uses (a flag given wins; else the runtime's own config where the node has
it, runtimeconf.py; else the layout's row), then the guard's state dir and log file (a flag
given, else the layout's). Every value is a node path (as the node names it); `*_here` is the
same seen from here, through the root (the node's links followed inside it for the CNI dirs, as
the runtime follows them: k3s's data/current, MicroK8s' current).
"""

from __future__ import annotations

from dataclasses import dataclass

from cni_delguard.host import layouts
from cni_delguard.host.root import NodeRoot, absolute, as_root


@dataclass(frozen=True)
class NodeDirs:
    root: NodeRoot
    layout: layouts.Layout
    conf_dir: str  # the CNI conf dir the runtime uses, as the node names it
    bin_dir: str  # the CNI bin dir the runtime uses (the first of several: where a plugin goes)
    source: str  # where those two came from: "flags", "layout table", "containerd <file>"...
    state_dir: str  # the guard's stateDir (a flag, else the layout's)
    log_file: str  # the guard's logFile (a flag, else the layout's; '' turned off)

    @property
    def conf_here(self) -> str:
        return self.root.located(self.conf_dir)

    @property
    def bin_here(self) -> str:
        return self.root.located(self.bin_dir)

    @property
    def state_here(self) -> str:
        return self.root.here(self.state_dir)

    @property
    def log_here(self) -> str:
        """The log file seen from here ('' when the log is turned off)."""
        return self.root.here(self.log_file) if self.log_file else ""


def find(
    root: NodeRoot | str,
    layout: str = layouts.AUTO,
    *,
    conf_dir: str | None = None,
    bin_dir: str | None = None,
    state_dir: str | None = None,
    log_file: str | None = None,
    needs: tuple[str, ...] = layouts.FIELDS,
    standard_when_none: bool = False,
) -> NodeDirs:
    """The node's dirs under `root`. `layout`: a row's name or `auto`; the overrides are the
    command's flags, as the node names them (None: not given); `needs`: the layout's fields
    the caller reads (a field whose flag is given is not needed: flags cannot make an
    ambiguity). `auto` finding nothing: layouts.NoLayoutError, or with `standard_when_none` the
    standard row (whose empty conf dir a report then shows). UsageError (OutsideRootError) for
    a flag that is not an absolute path; UsageError for layouts found that disagree."""
    node = as_root(root)
    given = {"conf_dir": conf_dir, "bin_dirs": bin_dir, "state_dir": state_dir,
             "log_file": log_file}
    wanted = tuple(f for f in needs if given.get(f) is None)
    try:
        row = layouts.choose(node, layout, wanted)
    except layouts.NoLayoutError:
        if not standard_when_none:
            raise
        row = layouts.STANDARD
    return of_layout(node, row, conf_dir=conf_dir, bin_dir=bin_dir, state_dir=state_dir,
                     log_file=log_file)


def of_layout(
    root: NodeRoot | str,
    layout: layouts.Layout,
    *,
    conf_dir: str | None = None,
    bin_dir: str | None = None,
    state_dir: str | None = None,
    log_file: str | None = None,
) -> NodeDirs:
    """`find` once the layout is known (a watcher's layout, never chosen again while the node
    runs): the runtime's dirs resolved now, the flags given winning."""
    node = as_root(root)
    conf = absolute(conf_dir) if conf_dir is not None else None
    bin_ = absolute(bin_dir) if bin_dir is not None else None
    conf_, bin__, source = layouts.runtime_dirs(layout, node, conf, bin_)
    return NodeDirs(
        root=node,
        layout=layout,
        conf_dir=conf_,
        bin_dir=bin__,
        source=source,
        state_dir=absolute(state_dir) if state_dir is not None else layout.state_dir,
        log_file=(absolute(log_file) if log_file else "") if log_file is not None
        else layout.log_file,
    )
