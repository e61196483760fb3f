"""The process that holds a test node's namespaces: made by `unshare` (a private mount namespace,
and a network namespace when asked), it bind-mounts the node's own dirs over the host's paths
inside (its /run, /var/lib/cni, ...; a path the host lacks made in an overlay only the node
sees), says "ready", and holds everything until its stdin closes.
Whatever the node runs enters its namespaces with nsenter (`enter`); the mounts go with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

# Run by the holder inside its new namespaces: lo up (with a network namespace), a mount point the
# host lacks made in an overlay of its nearest existing parent that only this namespace sees (the
# host's dirs are never written), then every bind; "ready"; then it waits for stdin to close.
SCRIPT = r"""
import os, subprocess, sys
def run(*argv):
    subprocess.run(argv, check=True, capture_output=True)
net, overlays, pairs = sys.argv[1], sys.argv[2], list(zip(sys.argv[3::2], sys.argv[4::2]))
if net == "net":
    run("ip", "link", "set", "lo", "up")
missing = [dst for _, dst in pairs if not os.path.exists(dst)]
if missing and overlays == "-":
    sys.exit("no mount point for " + ", ".join(missing))
parents = set()
for dst in missing:
    parent = os.path.dirname(dst)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    parents.add(parent)
done = []
for i, parent in enumerate(sorted(parents, key=len)):
    if parent == "/":
        sys.exit("no parent to overlay below /")
    if any(parent == d or parent.startswith(d + "/") for d in done):
        continue  # inside an overlay made already: writable
    up, work = f"{overlays}/{i}/up", f"{overlays}/{i}/work"
    os.makedirs(up), os.makedirs(work)
    run("mount", "-t", "overlay", "overlay", "-o",
        f"lowerdir={parent},upperdir={up},workdir={work}", parent)
    done.append(parent)
for src, dst in pairs:
    if dst in missing:
        if os.path.isdir(src):
            os.makedirs(dst)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            open(dst, "x").close()
for src, dst in pairs:
    run("mount", "--bind", src, dst)
print("ready", flush=True)
sys.stdin.read()
"""


def start(binds: Sequence[tuple[Path, str]], net: bool = False,
          overlays: Path | None = None) -> subprocess.Popen[str]:
    """A holder with `binds` (the node's dir or file, the path it takes inside) mounted; ready
    when it says so, after its last mount. A mount point the host lacks is made in an overlay
    under `overlays` (a fresh dir each start); without it, a missing one fails the start."""
    args = [a for src, dst in binds for a in (str(src), dst)]
    holder = subprocess.Popen(
        ["unshare", "--mount", *(["--net"] if net else []), "--propagation", "private", "--",
         sys.executable, "-I", "-c", SCRIPT, "net" if net else "-",
         str(overlays) if overlays is not None else "-", *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
