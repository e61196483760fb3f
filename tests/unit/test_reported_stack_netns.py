"""tests/support/reported_stack.py's node_netns and mount_only: where kube-ovn's host ends go, and
how the stack's daemons enter the node."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from tests.support.reported_stack import mount_only, node_netns
from tests.support.waiting import wait_for


@pytest.fixture
def own_netns_pid() -> Iterator[int]:
    """A process in a network namespace of its own, as a node's holder."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare")
    holder = subprocess.Popen(["unshare", "--net", "sleep", "300"])
    try:
        wait_for(lambda: os.readlink(f"/proc/{holder.pid}/ns/net")
                 != os.readlink("/proc/self/ns/net"), "the holder's netns", timeout=30)
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


def test_the_netns_the_prefix_enters_is_the_nodes() -> None:
    enter = ("nsenter", "--mount=/proc/7/ns/mnt", "--net=/proc/7/ns/net", "--")
    assert node_netns(enter) == "/proc/7/ns/net"
    assert mount_only(enter) == ("nsenter", "--mount=/proc/7/ns/mnt", "--")


def test_a_holder_with_a_netns_the_runtime_alone_enters(own_netns_pid: int) -> None:
    """The kubelet suite's node: its prefix enters the mount namespace only."""
    enter = ("nsenter", f"--mount=/proc/{own_netns_pid}/ns/mnt", "--")
    assert node_netns(enter) == f"/proc/{own_netns_pid}/ns/net"
    assert mount_only(enter) == enter


def test_a_node_without_a_netns_of_its_own_is_refused() -> None:
    """Its holder shares the machine's: the host ends would land there."""
    enter = ("nsenter", f"--mount=/proc/{os.getpid()}/ns/mnt", "--")
    with pytest.raises(RuntimeError, match="no network namespace of its own"):
        node_netns(enter)
