"""The kernel floor: ADD, DEL, a delegate timeout and the guard's death while its delegate runs
behave on a kernel without pidfd_open, clone3 and close_range as on this machine's kernel.

Those three system calls came with Linux 5.3 (pidfd_open, clone3) and 5.9 (close_range); Ubuntu
18.04 (4.15), Debian 10 (4.19) and RHEL 8 (4.18) have none of them. Such a kernel is stood in for
by a seccomp filter that answers all three with ENOSYS, inherited by the guard and everything it
starts (tests/reliability/seccomp_deny.py): the kernel itself refuses the calls, with no hook in the
product. Each test runs on the machine's kernel ("current"), behind that filter ("before-5.3"),
and behind a filter that refuses clone3 with EPERM ("clone3-eperm", an old runtime's seccomp
profile), with the same assertions. Before the SIGCHLD fallback (invoke/spawn.py) every ADD
behind the filter failed with code 11, "cannot watch delegate ...; it was killed".
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.harness import Bench, add_then_del_reach_the_delegate, attachment_files
from tests.reliability.procs import Gates, is_dead, wait_dead
from tests.reliability.seccomp_deny import CLONE3, CLOSE_RANGE, PIDFD_OPEN
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(
    os.uname().machine not in ("x86_64", "aarch64"), reason="seccomp_deny knows x86_64 and aarch64"
)
HELPER = Path(__file__).with_name("seccomp_deny.py")
MISSING = f"{PIDFD_OPEN},{CLONE3},{CLOSE_RANGE}"
TRY_AGAIN = 11


# What each kernel stand-in refuses, and with which errno. "clone3-eperm" is an old runtime's
# seccomp profile, written before clone3 existed, that answers unknown calls with EPERM: glibc's
# posix_spawn falls back to clone on ENOSYS only, and every forwarded call failed with code 100.
KERNELS = {
    "current": None,
    "before-5.3": (MISSING, errno.ENOSYS),
    "clone3-eperm": (str(CLONE3), errno.EPERM),
}


@pytest.fixture(params=list(KERNELS))
def kernel(request: pytest.FixtureRequest, bench: Bench) -> str:
    """Runs the bench's guard behind the filter of that stand-in."""
    denied = KERNELS[request.param]
    if denied is not None:
        calls, err = denied
        bench.prefix = [sys.executable, "-I", str(HELPER), calls, str(err), "--"]
    return str(request.param)


def seccomp_mode(pid: int) -> int:
    """The Seccomp field of /proc/<pid>/status: 2 while a filter is in force."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Seccomp:"):
            return int(line.split()[1])
    raise AssertionError(f"no Seccomp line for pid {pid}")


def test_the_filter_takes_the_calls_away() -> None:
    """The stand-in itself: behind the filter each call fails with ENOSYS, here it works."""
    probe = "import os; os.close(os.pidfd_open(os.getpid())); print('works')"
    here = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True,
                          check=False)
    behind = subprocess.run([sys.executable, "-I", str(HELPER), MISSING, str(errno.ENOSYS), "--",
                             sys.executable, "-I", "-c", probe], capture_output=True, text=True,
                            check=False)
    assert here.stdout.strip() == "works", here.stderr
    assert "[Errno 38] Function not implemented" in behind.stderr, behind.stderr


def test_add_then_del_reach_the_delegate(bench: Bench, kernel: str) -> None:
    add_then_del_reach_the_delegate(bench)


def test_delegate_timeout_kills_it(bench: Bench, kernel: str) -> None:
    gates = Gates(bench.gate_dir)
    held = bench.conf(bench.gated(gates=["ADD:start"]), timeouts={"add": 2})
    guard = bench.start("ADD", held)
    delegate = gates.wait("c1", "ADD", "start")
    run = guard.finish()
    assert run.rc == 1, run.describe()
    assert run.error()["code"] == TRY_AGAIN, run.describe()
    assert "timed out" in run.error()["msg"], run.describe()
    wait_dead(delegate, 5)
    again = bench.run("DEL", bench.conf())
    assert (again.rc, again.stdout) == (0, b""), again.describe()
    assert attachment_files(bench.entries(), "c1") == []


def test_guard_killed_while_delegate_runs_takes_it_down(bench: Bench, kernel: str) -> None:
    gates = Gates(bench.gate_dir)
    held = bench.conf(bench.gated(gates=["ADD:done"]))
    guard = bench.start("ADD", held)
    delegate = gates.wait("c1", "ADD", "done")
    wait_for(lambda: not is_dead(guard.pid), "the guard to be running", 5)
    assert seccomp_mode(delegate) == (0 if KERNELS[kernel] is None else 2)
    os.kill(guard.pid, signal.SIGKILL)
    assert guard.finish().rc == -signal.SIGKILL
    wait_dead(delegate, 5)  # the guardian saw the guard die and killed the delegate's group
    again = bench.run("DEL", bench.conf())
    assert (again.rc, again.stdout) == (0, b""), again.describe()
    assert attachment_files(bench.entries(), "c1") == []
    assert not bench.fake_holds()
