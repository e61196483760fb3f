"""Does a plugin run on the node: it answers CNI VERSION, run as the runtime would run it.

The one way the installer, `ready`, the watcher and `doctor` ask: through host/run.py, chrooted
into the node's root, so the plugin meets the node's own loader, C library, /etc/ld.so.preload
and `#!` interpreter, never those of the image this process runs from (a plugin that runs here
may not run on the node at all), with PROBE_ENVIRONMENT only.
"""

from __future__ import annotations

import json

from cni_delguard import PLUGIN_TYPE
from cni_delguard.host import run
from cni_delguard.host.root import NodeRoot, as_root

PROBE_TIMEOUT = 30.0

# The probe's environment: CNI_COMMAND and nothing else, none of it read from /proc. A runtime's
# environment cannot be read from the installer's pod (/proc/<pid>/environ needs CAP_SYS_PTRACE
# over a process with more capabilities), so any process that borrowed the runtime's name would
# choose it, LD_DEBUG and LD_DEBUG_OUTPUT among it. What a runtime's environment could change
# for the frozen bundle, it does not: the launcher is static and sets the loader's variables
# aside, and the bundle's loader is sealed (packaging/README.md); the node's /etc/ld.so.preload
# is still met, through the chroot.
PROBE_ENVIRONMENT = {"CNI_COMMAND": "VERSION"}


def answers_version(path: str, root: NodeRoot | str = "/") -> tuple[list[object] | None, str]:
    """(the CNI versions the plugin at `path` reports, "") when it answers VERSION; (None, why)
    otherwise. `path` is as seen from here, under `root`."""
    node = as_root(root)
    on_node = node.on_node(path)
    if on_node is None:
        return None, f"{path} is not under the node's root {node.path}"
    where = "" if node.is_host else f" with {node.path} as /"
    try:
        r = run.program(node, on_node, [], dict(PROBE_ENVIRONMENT), PROBE_TIMEOUT)
    except run.TimedOutError:
        return None, f"{on_node} does not answer VERSION{where} within {PROBE_TIMEOUT:.0f} s"
    except run.NotRunError as exc:
        return None, str(exc)
    try:
        versions = json.loads(r.stdout).get("supportedVersions")
    except (ValueError, AttributeError, RecursionError):
        versions = None
    if r.returncode != 0 or not isinstance(versions, list):
        said = run.one_line(r.stderr) or run.one_line(r.stdout)
        return None, f"{on_node} does not answer VERSION{where} (exit {r.returncode}): {said}"
    return versions, ""


def runs(bin_dir: str, root: NodeRoot | str = "/") -> str | None:
    """None if the bin dir's cni-delguard answers CNI VERSION with `root` as /, else why not."""
    versions, why = answers_version(f"{bin_dir}/{PLUGIN_TYPE}", root)
    return why if versions is None else None
