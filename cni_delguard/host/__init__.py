"""The host floor: the node's filesystem as this process reaches it (`--root`), and its rules.

Everything of node/, ops/ and monitoring/ that names a path of the node or runs a program of the
node goes through here; no other module joins `--root` itself (tests/unit/test_layers.py reads
the imports and the source to keep that so). The rules, each tested case by case in
tests/unit/test_host_*.py:

1. No path leaves the root: a node path is normalised before it is joined (`/../..` is `/`).
2. A read opens every component below the root without following a link; the node's own links
   are followed only when a caller asks (`resolve`), and then inside the root, as a chroot
   follows them.
3. A process's root (/proc/PID/root) is a NodeRoot nested in the node's: a value read from that
   process (its `-config`) is normalised against it and cannot leave it.
4. Nothing of the node is executed as the host: a node program runs chrooted into the node's
   root (at `/`, the plain exec of the node's own program), only when it and every directory
   above it are root's and not writable by others, and never when it was found through a
   process's root.

| module | job |
| --- | --- |
| `root.py` | `NodeRoot`: here / resolve / on_node / read / process; `absolute`; `as_root` |
| `run.py` | `program`: run a node program the one safe way, output bounded while it runs |
| `layouts.py` | the node layouts, one row each; `auto` finds one under the root |
| `runtimeconf.py` | the CNI dirs the runtime's own config names (containerd, CRI-O, k3s, snap) |
| `dirs.py` | `find`: layout + runtime config + flags -> `NodeDirs`, once for every command |

API (kept stable: ops/assess and others build on it):

    from cni_delguard.host import dirs, layouts, run
    from cni_delguard.host.root import NodeRoot, OutsideRootError, absolute

    root = NodeRoot("/host")                  # or NodeRoot() for "/"; root.is_host
    root.here("/etc/../etc/cni")              # "/host/etc/cni": normalised, no link followed
    root.resolve("/var/lib/k3s/data/current") # node path, the node's links followed inside
    root.located(path)                        # here(resolve(path))
    root.on_node("/host/opt/cni/bin")         # "/opt/cni/bin" (None: not under the root)
    root.read(path, limit) -> bytes           # no link at any component; OSError otherwise
    root.read_or_none(path, limit)            # None for missing/link/special/too big
    root.head(path, size) -> bytes            # first bytes of a regular file (b"" if none)
    root.open_dir(path) -> fd                 # no link at any component (caller closes)
    root.is_dir(path); root.lexists(path)
    proc = root.process(pid)                  # /proc/PID/root as a nested NodeRoot
    proc.through_process                      # True: run.program refuses it
    proc.read(proc_config_value, limit)       # "/../../x" is that process's /x

    ran = run.program(root, "/usr/bin/containerd", ["--version"], {"PATH": ...},
                      timeout=10.0, limit=64 * 1024)
    ran.returncode, ran.stdout, ran.stderr, ran.cut, ran.path
    # run.NotRunError (one line: refused, cannot exec, cannot chroot), run.TimedOutError
    run.one_line(data)                        # first printable line of an output

    d = dirs.find(root, "auto", conf_dir=None, bin_dir=None, state_dir=None, log_file=None,
                  needs=layouts.FIELDS, standard_when_none=False)
    d.layout (layouts.Layout), d.conf_dir, d.bin_dir, d.source, d.state_dir, d.log_file
    d.conf_here, d.bin_here, d.state_here, d.log_here   # seen from here
    dirs.of_layout(root, layout_row, conf_dir=..., ...)  # find, the layout known (a watcher)
    # layouts.NoLayoutError (auto found nothing; .code 4), UsageError (layouts disagree,
    # or a flag that is not an absolute path)

Every function that takes a root takes a NodeRoot or its path (`as_root`).
"""

from __future__ import annotations
