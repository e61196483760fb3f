"""`cni-delguard install` / `uninstall` / `live` / `ready`: put the guard on a node, keep it, take
it off.

Not on the plugin's exec path: cni_delguard.cli imports `node.cli` only for these subcommands.
Every path of the node is reached through the host floor (cni_delguard/host: NodeRoot, the
layouts, the node's dirs); `install --watch` is assembled above this package
(cni_delguard/watcher.py). One module per job:

| module | job |
| --- | --- |
| `cli.py` | the one-shot commands' options, the one place errors become a line and an exit code |
| `errors.py` | the one error base, and the exit code of each kind of refusal |
| `actions.py` | install / uninstall / repair: order of steps, compare-before-swap, dry-run diff |
| `bundle.py` | the one-folder bundle into the bin dir: manifest, verified copy, atomic switch |
| `confdir.py` | which conf file the runtime uses; multus detection; strict JSON reading |
| `patch.py` | pure wrap / unwrap of a conf around the guard |
| `record.py` | the original conf bytes for a byte-identical uninstall; the uninstall record |
| `hostlock.py` | the flock every installer on the node (any container) takes before a change |
| `ready.py` | the readiness probe: is this node guarded right now |
| `follow.py` | the decision log read as it grows (`Tail`); DELs let through, into the log |
| `fsops.py` | file copy, symlink switch, fsync of directories, private dirs |
| `watch.py` | `--watch`'s loop: keep the conf wrapped and the bundle whole, with storm damping |
| `live.py` | the liveness heartbeat the watcher writes and `live` reads |
| `multusdaemon.py` | multus thick's `cniDir` from its daemon config, for `multusCacheDirs` |
| `options.py` | the options every operator command shares |
| `runs.py` | does a plugin run on the node: it answers VERSION, run as the runtime would run it |
| `kubeletconf.py` | the kubelet's runtime request timeout, read on the node: the guard's timeouts |
"""

from __future__ import annotations
