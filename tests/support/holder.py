"""The process that holds a test node's namespaces: made by `unshare` (a private mount namespace,
and a network namespace when asked), it bind-mounts the node's own dirs over the host's paths
inside (its /run, /var/lib/cni, ...; a path the host lacks made in an overlay only the node
sees), says "ready", and holds everything until its stdin closes (nsrun.py does the work).
Whatever the node runs enters its namespaces with nsenter (`enter`); the mounts go with it.
`once` is the same namespace for one command, gone when it exits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

NSRUN = Path(__file__).resolve().parent / "nsrun.py"


def _unshare(binds: Sequence[tuple[Path, str]], net: bool, overlays: Path | None) -> list[str]:
    """unshare + nsrun.py with these binds (an argv to which `--` and a command may be added)."""
    return ["unshare", "--mount", *(["--net"] if net else []), "--propagation", "private", "--",
            sys.executable, "-I", str(NSRUN), *(["--net"] if net else []),
            *(["--overlays", str(overlays)] if overlays is not None else []),
            *(f"{src}:{dst}" for src, dst in binds)]


def once(binds: Sequence[tuple[Path, str]], argv: Sequence[str]) -> list[str]:
    """The argv that runs `argv` once in a private mount namespace of its own with `binds`
    mounted (nsrun.py execs it: its output and exit status are the command's)."""
    return [*_unshare(binds, net=False, overlays=None), "--", *argv]


def start(binds: Sequence[tuple[Path, str]], net: bool = False,
          overlays: Path | None = None) -> subprocess.Popen[str]:
    """A holder with `binds` (the node's dir or file, the path it takes inside) mounted; ready
    when it says so, after its last mount. A mount point the host lacks is made in an overlay
    under `overlays` (a fresh dir each start); without it, a missing one fails the start."""
    holder = subprocess.Popen(
        _unshare(binds, net, overlays), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stderr is not None
    line = holder.stdout.readline()
    if line.strip() != "ready":
        holder.wait(timeout=30)
        raise RuntimeError(f"the node's namespace holder failed (said {line!r}): "
                           f"{holder.stderr.read()[-2000:]}")
    return holder


def enter(holder: subprocess.Popen[str], net: bool = False) -> tuple[str, ...]:
    """The argv prefix that runs a command in the holder's namespaces (nsenter execs it in
    place: the pid is the command's)."""
    ns = f"/proc/{holder.pid}/ns"
    return ("nsenter", f"--mount={ns}/mnt", *([f"--net={ns}/net"] if net else []), "--")


def mount_ns(holder: subprocess.Popen[str]) -> str:
    return os.readlink(f"/proc/{holder.pid}/ns/mnt")


def stop(holder: subprocess.Popen[str], timeout: float = 30) -> None:
    """Close its stdin: it exits, and its namespaces (with every mount in them) go."""
    if holder.stdin is not None and not holder.stdin.closed:
        holder.stdin.close()
    holder.wait(timeout=timeout)
    if holder.stderr is not None:
        holder.stderr.close()
