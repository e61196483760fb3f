"""`cni-delguard install` / `uninstall` / `ready`: put the guard on a node, keep it, take it off.

Not on the plugin's exec path: cni_delguard.cli imports `node.cli` only for these subcommands.
One module per job:

| module | job |
| --- | --- |
| `cli.py` | options, the one place errors become a line on stderr and an exit code |
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
| `watch.py` | `--watch`: keep the conf wrapped and the bundle whole, with storm damping |
| `options.py` | the options every command shares; `under`, the one `--root` join; `located` |
| `layouts.py` | the node layouts, one row each; `--layout auto` finds one under the root |
| `kubeletconf.py` | the kubelet's runtime request timeout, read on the node: the guard's timeouts |
"""

from __future__ import annotations
