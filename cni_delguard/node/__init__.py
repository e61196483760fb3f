"""`cni-delguard install` / `uninstall`: put the guard on a node and take it off again.

Not on the plugin's exec path: cni_delguard.cli imports `installer.cli` only for these two
subcommands. One module per job:

| module | job |
| --- | --- |
| `cli.py` | options, the one place errors become a line on stderr and an exit code |
| `actions.py` | install / uninstall: the order of steps, dry-run diff |
| `bundle.py` | the one-folder bundle into the bin dir: versioned dir, atomic symlink switch |
| `confdir.py` | which conf file the runtime uses; strict JSON reading |
| `patch.py` | pure wrap / unwrap of a conf around the guard |
| `record.py` | the original conf bytes, kept for a byte-identical uninstall |
| `fsops.py` | atomic writes, O_NOFOLLOW reads, fsync of files and directories |
| `watch.py` | `--watch`: re-apply the patch when the conf is rewritten, with back-off |
"""

from __future__ import annotations
