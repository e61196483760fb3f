"""Where multus thick keeps its cache (`cniDir`), for the guard's `multusCacheDirs`.

Thin multus names its `cniDir` in the conf the guard wraps (patch.py takes it from there). Thick
multus does not: the shim's conf holds no `cniDir`, the daemon's own config (a ConfigMap,
`daemon-config.json`) does, and at its default it is /var/lib/cni/multus, the guard's default
too. A non-default value there, unseen, would make the guard skip a DEL whose only evidence is
multus's cache (a leak). So: `install --multus-cache-dir DIR` names it; without it, the daemon
config is read where a DaemonSet mounts it from the host (`multus.d/daemon-config.json` in the
CNI conf dir: multus's default `--config` path) and its `cniDir` (a path on the node: the daemon
runs the delegates chrooted into the host, `chrootDir`) is used. The guard keeps the default dir
as well (more evidence only ever forwards a DEL).
"""

from __future__ import annotations

import json
import os

from cni_delguard.guard import defaults
from cni_delguard.host.root import NodeRoot, absolute, as_root
from cni_delguard.tooling import UsageError

DAEMON_CONFIG = "multus.d/daemon-config.json"  # under the CNI conf dir
_MAX_BYTES = 1 << 20


def cni_dir(root: NodeRoot | str, conf_dir: str) -> str | None:
    """The `cniDir` of multus thick's daemon config under the node's conf dir (as the node
    names it), or None when there is none, or it is not readable JSON naming an absolute path."""
    node = as_root(root)
    try:
        body = json.loads(node.read(node.resolve(os.path.join(conf_dir, DAEMON_CONFIG)),
                                    _MAX_BYTES))
        value = body.get("cniDir") if isinstance(body, dict) else None
        return absolute(value) if isinstance(value, str) else None
    except (OSError, ValueError, RecursionError, UsageError):
        return None


def cache_dirs(first: str) -> list[str]:
    """The guard's multusCacheDirs with `first` looked in first, the default kept."""
    return list(dict.fromkeys([absolute(first), *defaults.MULTUS_CACHE_DIRS]))
