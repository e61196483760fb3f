"""Orphans of an abandoned ADD: processes a killed guard's delegate left running.

The guardian (spawn.py) kills the delegate's process group when the guard dies, but a process
can escape it: one the delegate moved to another process group of its session, or the whole
delegate when the guard died in the instant between starting it and starting the guardian.
Such a process can finish the abandoned ADD after the runtime's DEL has already run, leaving
state no later DEL will look for. So before a DEL is forwarded for an ADD that never completed,
the guard kills what is left of that ADD.

What counts as left of it, all three at once: a process in the session the delegate was started in
(the guard starts each delegate in a new session and records the session ID in the attempted
marker), whose environment carries this attachment's CNI_CONTAINERID and CNI_IFNAME. A recycled
session ID alone can therefore never make the guard kill an unrelated process.
"""

from __future__ import annotations

import os
import time

from cni_delguard.invoke import spawn

PROC = "/proc"


def _session_of(stat: bytes) -> int:
    """The session field of /proc/<pid>/stat (the comm field may contain spaces or parens)."""
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[3])


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def orphans(session: int, container_id: str, ifname: str, proc: str = PROC) -> list[int]:
    """PIDs in `session` whose environment names this attachment."""
    wanted = {f"CNI_CONTAINERID={container_id}".encode(), f"CNI_IFNAME={ifname}".encode()}
    found = []
    for name in os.listdir(proc):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        stat = _read(f"{proc}/{name}/stat")
        if stat is None or _session_of(stat) != session:
            continue
        environ = _read(f"{proc}/{name}/environ")
        if environ is not None and wanted <= set(environ.split(b"\0")):
            found.append(int(name))
    return found


def kill_orphans(session: int, container_id: str, ifname: str, wait: float = 5.0) -> int:
    """SIGKILL the abandoned ADD's processes and wait (bounded) until they are gone."""
    pids = orphans(session, container_id, ifname)
    killed = len(pids)
    for pid in pids:
        spawn.kill(pid, group=False)
    deadline = time.monotonic() + wait
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if _alive(p)]
        if pids:
            time.sleep(0.01)
    return killed


def _alive(pid: int) -> bool:
    """Running, or at least not yet a zombie (a zombie holds nothing but its PID)."""
    stat = _read(f"{PROC}/{pid}/stat")
    if stat is None:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] != b"Z"
