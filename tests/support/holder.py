"""The process that holds a test node's namespaces: made by `unshare` (a private mount namespace,
and a network namespace when asked), it bind-mounts the node's own dirs over the host's paths
inside (its /run, /var/lib/cni, ...), says "ready", and holds everything until its stdin closes.
Whatever the node runs enters its namespaces with nsenter (`enter`); the mounts go with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

SCRIPT = r"""
import subprocess, sys
if sys.argv[1] == "net":
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
for src, dst in zip(sys.argv[2::2], sys.argv[3::2]):
    subprocess.run(["mount", "--bind", src, dst], check=True)
print("ready", flush=True)
sys.stdin.read()
"""


def start(binds: Sequence[tuple[Path, str]], net: bool = False) -> subprocess.Popen[str]:
    """A holder with `binds` (the node's dir, the path it takes inside) mounted; ready when it
    says so, after its last mount."""
    args = [a for src, dst in binds for a in (str(src), dst)]
    holder = subprocess.Popen(
        ["unshare", "--mount", *(["--net"] if net else []), "--propagation", "private", "--",
         sys.executable, "-I", "-c", SCRIPT, "net" if net else "-", *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    line = holder.stdout.readline()
    if line.strip() != "ready":
        stop(holder)
        raise RuntimeError(f"the node's namespace holder failed (said {line!r})")
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
