"""What `doctor` examines and what it reports: the node as found under `--root` (`Node`, from
the conf the runtime uses) and one `Finding` per thing worth saying.

The guard's own paths are read from its entry in that conf as the guard reads them (config.Peek:
normalized, the defaults for what is missing or malformed), then reached through `--root` by the
host floor (NodeRoot.here): a conf's `/../var/lib/cni/delguard` is the node's
/var/lib/cni/delguard under the root, never a dir beside it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

from cni_delguard.guard import config, defaults
from cni_delguard.host.dirs import NodeDirs
from cni_delguard.host.root import NodeRoot
from cni_delguard.node import confdir, patch
from cni_delguard.node.errors import InstallerError
from cni_delguard.state import fsutil

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

OK, INFO, PROBLEM = "ok", "info", "problem"
MAX_CONF = 4 * 1024 * 1024
MAX_TIMEOUT = 86400


@dataclass
class Finding:
    check: str
    severity: str
    message: str
    path: str | None = None
    repair: Callable[[], str] | None = None
    repaired: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "severity": self.severity,
            "message": self.message,
            "path": self.path,
            "repairable": self.repair is not None,
            "repaired": self.repaired,
        }


@dataclass
class Node:
    """Where things are on the node (under --root), from the conf the runtime uses."""

    root: str
    conf_dir: str
    bin_dir: str
    layout: str = "standard"  # the node's layout (host/layouts.py), as chosen or found
    source: str = "layout table"  # where conf_dir and bin_dir came from (layouts.runtime_dirs)
    conf_path: str | None = None
    conf: dict[str, Any] | None = None
    conf_error: str | None = None
    guard: dict[str, Any] | None = None
    # The guard's stateDir as the node names it (for commands to run there), and under --root.
    node_state_dir: str = defaults.STATE_DIR
    state_dir: str = ""
    result_dirs: tuple[str, ...] = ()
    multus_dirs: tuple[str, ...] = ()
    log_file: str = ""
    add_timeout: float = defaults.TIMEOUTS["add"]
    now: float = field(default_factory=time.time)

    @property
    def host(self) -> NodeRoot:
        return NodeRoot(self.root)

    def under(self, path: str) -> str:
        """A node path as seen from here, through the host floor."""
        return self.host.here(path)


def discover(found: NodeDirs) -> Node:
    """The node whose dirs are `found` (host/dirs.py). What the conf does not say is the
    guard's default when the conf names the guard (what the plugin itself takes), else the
    layout's (where it would be once wrapped)."""
    layout = found.layout
    node = Node(found.root.path, found.conf_here, found.bin_here, layout.name, found.source)
    names = _conf_names(node.conf_dir)
    if names:
        node.conf_path = os.path.join(node.conf_dir, names[0])
        node.conf, node.conf_error = _read_conf(node.conf_path)
    if node.conf is not None and node.conf_path is not None:
        entries = patch.guard_plugins(node.conf, confdir.is_list(node.conf_path))
        node.guard = entries[0] if entries else None
    keys = node.guard or {}
    fallback = config.Defaults() if node.guard else config.Defaults(
        state_dir=layout.state_dir,
        result_cache_dirs=layout.result_cache_dirs,
        multus_cache_dirs=layout.multus_cache_dirs,
        log_file=layout.log_file,
    )
    peek = config.Peek(keys, dflt=fallback)  # what the guard itself makes of these keys
    node.node_state_dir = peek.state_dir
    node.state_dir = node.under(peek.state_dir)
    node.result_dirs = tuple(node.under(d) for d in peek.result_cache_dirs)
    node.multus_dirs = tuple(node.under(d) for d in peek.multus_cache_dirs)
    node.log_file = node.under(peek.log_file) if peek.log_file else ""
    timeouts = keys.get("timeouts")
    add = timeouts.get("add") if isinstance(timeouts, dict) else None
    node.add_timeout = _seconds(add) or node.add_timeout
    return node


def _seconds(value: object) -> float | None:
    """A timeout from the conf: a positive number of seconds, a day at most (NaN, 1e999 and a
    400-digit integer are not; the comparison comes first, so float() never overflows)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 < value <= MAX_TIMEOUT else None


def _conf_names(conf_dir: str) -> list[str]:
    """The conf files in the order the runtime (and the installer) reads them."""
    try:
        return confdir.conf_files(conf_dir)
    except (InstallerError, OSError):
        return []


def _read_conf(path: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        data = fsutil.read_at(None, path, MAX_CONF)
    except OSError as exc:
        return None, f"cannot read it: {exc.strerror or exc}"
    if data is None:
        return None, "not a regular file (a symlink?)"
    try:
        conf = json.loads(data)
    except (ValueError, RecursionError) as exc:
        return None, f"not valid JSON: {exc}"
    return (conf, None) if isinstance(conf, dict) else (None, "not a JSON object")
