"""Wait for a concrete, observable event (a socket answering, a file line, a process exit): the
one `wait_for` of every suite.

Each wait names what it waits for, checks it often, and fails with that name at its deadline
(and, when given, `detail()`: the log or output that says why). There is no bare sleep: the
short pause between checks only paces a condition that is read again each time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

POLL = 0.01


class WaitTimeoutError(AssertionError):
    pass


def wait_for(
    check: Callable[[], T | None],
    what: str,
    timeout: float = 30,
    every: float = POLL,
    detail: Callable[[], str] | None = None,
) -> T:
    """Return check()'s first truthy value; fail naming `what` (and `detail()`) after timeout
    seconds. `every`: the pause between checks (longer for a check that starts a process)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            more = f"\n{detail()}" if detail is not None else ""
            raise WaitTimeoutError(f"timed out after {timeout}s waiting for {what}{more}")
        time.sleep(every)


def pid_alive(pid: int) -> bool:
    """True while pid exists and any of its threads is not a zombie. The process's own state is
    its leader thread's: a leader that exited (Z) while another thread still finishes a system
    call keeps the process listed in its cgroup, so its cgroup cannot be removed yet."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", encoding="utf-8") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if state not in ("Z", "X"):
            return True
    return False


def wait_gone(pids: list[int], what: str, timeout: float = 30) -> None:
    wait_for(lambda: not any(pid_alive(p) for p in pids), what, timeout)


def ppid_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def descendants(root: int) -> list[int]:
    """Every live process below root (children first found, then theirs)."""
    children: dict[int, list[int]] = {}
    for pid in all_pids():
        try:
            children.setdefault(ppid_of(pid), []).append(pid)
        except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
            continue
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
