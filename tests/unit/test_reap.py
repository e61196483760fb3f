"""Killing what an abandoned ADD left running: only that session, only that attachment."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cni_delguard.invoke import reap
from tests.support.waiting import WaitTimeoutError, wait_for

SPAWN = """
import os, subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
        for env in ({extra_envs})]
print(" ".join(str(k.pid) for k in kids), flush=True)
time.sleep(60)
"""


def _session(env_sets):
    """A 'delegate' in a new session whose children carry the given environments."""
    code = SPAWN.format(extra_envs=", ".join(repr(e) for e in env_sets) + ",")
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    kids = [int(p) for p in proc.stdout.readline().split()]
    return proc, kids


def _gone(pid, within=5.0):
    """Whether `pid` is gone (as reap sees it) within `within` seconds."""
    try:
        wait_for(lambda: not reap._alive(pid), f"{pid} to be gone", within, every=0.02)
    except WaitTimeoutError:
        return False
    return True


def _cleanup(proc, kids):
    for pid in [proc.pid, *kids]:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    proc.wait()


def test_only_this_attachments_processes_in_that_session_are_killed():
    base = {"PATH": os.environ.get("PATH", "/usr/bin")}
    ours = dict(base, CNI_CONTAINERID="c1", CNI_IFNAME="eth0")
    other_ifname = dict(base, CNI_CONTAINERID="c1", CNI_IFNAME="net1")
    proc, kids = _session([ours, other_ifname])
    stranger, stranger_kids = _session([ours])  # same attachment env, another session
    try:
        assert reap.orphans(proc.pid, "c1", "eth0") == [kids[0]]
        proc.kill()  # the delegate dies (as with PR_SET_PDEATHSIG); its child lives on
        proc.wait()
        assert reap.kill_orphans(proc.pid, "c1", "eth0") == 1
        assert _gone(kids[0])
        assert not _gone(kids[1], within=0.2)
        assert not _gone(stranger_kids[0], within=0.2)
    finally:
        _cleanup(proc, kids)
        _cleanup(stranger, stranger_kids)


@pytest.mark.parametrize("comm", [b"a b", b"x) y (z", b")"])
def test_session_is_read_past_any_comm(comm):
    stat = b"123 (" + comm + b") S 1 100 4242 0 -1"
    assert reap._session_of(stat) == 4242


def test_nothing_to_kill_is_fine():
    assert reap.kill_orphans(2**22 + 12345, "c1", "eth0") == 0
