"""tests/support/nodeapi.py: the fake API server listens in the network namespace it is given,
and nowhere else; `move` takes it to another one; the caller's thread stays where it was.

Each namespace is a private one made here (`unshare --net`, held by a sleeping process), never
the machine's /run/netns.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.nodeapi import NodeKubeAPI
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")

CONNECT = ("import socket, sys\n"
           "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)\n"
           "s.close()\n")


@pytest.fixture
def netns() -> Iterator[list[str]]:
    """Paths of private network namespaces, each held by a process of its own (lo up)."""
    holders: list[subprocess.Popen[bytes]] = []
    paths: list[str] = []

    def make() -> str:
        proc = subprocess.Popen(["unshare", "--net", "--", "sleep", "300"])
        holders.append(proc)
        path = f"/proc/{proc.pid}/ns/net"
        wait_for(lambda: os.readlink(path) != os.readlink("/proc/self/ns/net"),
                 "unshare to make its namespace", timeout=30, every=0.02)
        subprocess.run(["nsenter", f"--net={path}", "--", "ip", "link", "set", "lo", "up"],
                       check=True)
        paths.append(path)
        return path

    make()
    make()
    try:
        yield paths
    finally:
        for proc in holders:
            proc.kill()
            proc.wait()


def reaches(netns: str, port: int) -> bool:
    done = subprocess.run(["nsenter", f"--net={netns}", "--", sys.executable, "-I", "-c",
                           CONNECT, str(port)], capture_output=True, check=False)
    return done.returncode == 0


def reaches_here(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except OSError:
        return False
    return True


def test_it_listens_only_in_the_namespace_given_and_moves(tmp_path: Path,
                                                          netns: list[str]) -> None:
    first, second = netns
    mine = os.readlink("/proc/thread-self/ns/net")
    api = NodeKubeAPI(tmp_path / "api")
    api.start_in(first)
    try:
        port = api.port
        assert reaches(first, port)
        assert not reaches(second, port)
        assert not reaches_here(port)
        assert os.readlink("/proc/thread-self/ns/net") == mine, "the caller's thread moved"
        api.move(second)
        assert reaches(second, api.port)
        assert not reaches(first, api.port)
    finally:
        api.stop()


def test_a_namespace_that_is_not_there_fails_the_start(tmp_path: Path) -> None:
    api = NodeKubeAPI(tmp_path / "api")
    with pytest.raises(FileNotFoundError):
        api.start_in(str(tmp_path / "no-such-netns"))
    assert api.server is None
