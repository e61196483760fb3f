"""SIGCHLD as a hostile parent leaves it: ignored, or blocked; with pidfd_open and without.

Both survive exec, so a runtime, a shell or a supervisor that ignores or blocks SIGCHLD hands
that to the guard (tests/reliability/sigstate.py does, then execs the guard). Ignored, the kernel
reaps the delegate by itself and waiting for it fails: every forwarded call failed with code 5
("No child processes"). Blocked, on a kernel without pidfd_open (stood in for by the seccomp
filter of test_kernel_floor.py) the SIGCHLD pipe never woke: an ADD whose delegate succeeded was
reported as timed out (code 11), after the whole ADD timeout. The launcher puts SIGCHLD back
before anything starts (packaging/launcher/launcher.c), and so does the package before each
delegate (invoke/spawn.py).
"""

from __future__ import annotations

import errno
import sys
from pathlib import Path

import pytest

from tests.reliability.harness import Bench, add_then_del_reach_the_delegate
from tests.reliability.seccomp_deny import PIDFD_OPEN
from tests.reliability.test_kernel_floor import HELPER as SECCOMP

SIGSTATE = Path(__file__).with_name("sigstate.py")
ADD_TIMEOUT = 20  # the bench's timeouts.add: a woken guard answers in well under a second


@pytest.fixture(params=[
    pytest.param(("ignore", "pidfd"), id="ignored-pidfd"),
    pytest.param(("ignore", "no-pidfd"), id="ignored-no-pidfd"),
    pytest.param(("block", "pidfd"), id="blocked-pidfd"),
    pytest.param(("block", "no-pidfd"), id="blocked-no-pidfd"),
])
def sigchld(request: pytest.FixtureRequest, bench: Bench) -> str:
    how, kernel = request.param
    prefix = [sys.executable, "-I", str(SIGSTATE), how, "--"]
    if kernel == "no-pidfd":
        if not SECCOMP.exists():  # pragma: no cover - the helper lives beside this file
            pytest.fail("seccomp_deny.py is missing")
        prefix += [sys.executable, "-I", str(SECCOMP), str(PIDFD_OPEN), str(errno.ENOSYS), "--"]
    bench.prefix = prefix
    return f"{how}-{kernel}"


def test_add_then_del_reach_the_delegate(bench: Bench, sigchld: str) -> None:
    add = add_then_del_reach_the_delegate(bench)
    assert add.wall_s < ADD_TIMEOUT / 2, add.describe()  # woken by the delegate's exit
