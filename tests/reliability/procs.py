"""Waiting on processes and on the gated fake delegate (tests/fakes/gated_delegate.py)."""

from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path

from tests.support.waiting import wait_for

POLL = 0.005


def proc_state(pid: int) -> str | None:
    """The one-letter state from /proc/<pid>/stat; None when the process is gone."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return data[data.rindex(b")") + 2 :].split(b" ", 1)[0].decode()


def is_dead(pid: int) -> bool:
    """Gone or a zombie (a zombie runs no code; init may be slow to reap it)."""
    return proc_state(pid) in (None, "Z", "X")


def wait_dead(pid: int, timeout: float) -> float:
    """Seconds until `pid` died; AssertionError if it outlives `timeout`."""
    start = time.monotonic()
    wait_for(lambda: is_dead(pid), f"pid {pid} to die", timeout, every=POLL)
    return time.monotonic() - start


def kill_quietly(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


class Gates:
    """The test side of the gated fake's gates: see when it is waiting, and let it go on."""

    def __init__(self, gate_dir: Path) -> None:
        self.gate_dir = gate_dir

    def base(self, cid: str, command: str, point: str) -> Path:
        return self.gate_dir / f"{cid}.{command}.{point}"

    def wait(self, cid: str, command: str, point: str, timeout: float = 30) -> int:
        """The pid of the fake once it waits at the gate."""
        pid_file = Path(f"{self.base(cid, command, point)}.pid")
        wait_for(pid_file.exists, f"gate {cid} {command}:{point}", timeout, every=POLL)
        return int(pid_file.read_text())

    def release(self, cid: str, command: str, point: str, timeout: float = 10) -> None:
        """Open the FIFO for writing and close it: the reader sees EOF and goes on."""
        fifo = f"{self.base(cid, command, point)}.fifo"

        def opened() -> int | None:
            try:
                return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno not in (errno.ENXIO, errno.ENOENT):
                    raise
                return None  # no reader yet (ENXIO), or no FIFO yet

        os.close(wait_for(opened, f"gate {cid} {command}:{point} to have its reader", timeout,
                          every=POLL))

    def reset(self, cid: str, command: str, point: str) -> None:
        for suffix in (".pid", ".fifo"):
            Path(f"{self.base(cid, command, point)}{suffix}").unlink(missing_ok=True)
