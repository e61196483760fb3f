"""tests/support/node.py with real namespaces: what the node writes lands in its own dirs, its
network namespaces and processes live inside it, power_off ends them and empties what is
volatile, teardown leaves nothing and says so."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import pytest

from tests.support.daemon import Daemon, LogLine
from tests.support.node import Node
from tests.support.waiting import pid_alive

pytestmark = [pytest.mark.netns,
              pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root")]


@dataclass
class Small(Node):
    prefix: ClassVar[str] = "dgtn-"
    dirs: ClassVar[tuple[str, ...]] = ("disk",)
    own: ClassVar[tuple[tuple[str, str], ...]] = (("run", "/run"), ("var-lib-cni", "/var/lib/cni"))
    volatile: ClassVar[tuple[str, ...]] = ("run",)


@pytest.fixture
def node() -> Iterator[Small]:
    made = Small.make()
    try:
        made.boot()
        yield made
    finally:
        assert made.teardown() == []
        assert not made.tmp.exists()


def test_what_it_writes_inside_lands_in_its_own_dirs(node: Small) -> None:
    assert node.run_inside(["touch", "/run/mark", "/var/lib/cni/mark"]).returncode == 0
    assert (node.tmp / "run" / "mark").exists() and (node.tmp / "var-lib-cni" / "mark").exists()
    assert not os.path.exists("/run/mark")
    assert node.path("/var/lib/cni/results/x") == node.tmp / "var-lib-cni" / "results" / "x"
    with pytest.raises(KeyError):
        node.path("/etc/cni/net.d")


def test_a_netns_made_inside_is_the_nodes(node: Small) -> None:
    path = node.add_netns()
    assert path.startswith("/run/netns/")
    assert node.path(path).exists(), "its mount point is in the node's /run"
    shown = node.run_inside(["ip", "netns", "list"])
    assert path.rsplit("/", 1)[1] in shown.stdout


def test_power_off_ends_its_processes_and_empties_what_is_volatile(node: Small) -> None:
    (node.tmp / "disk" / "kept").write_text("x")
    d = Daemon("sleeper", [*node.enter, "sh", "-c", "echo up; exec sleep 300"],
               node.tmp / "disk" / "sleeper.log", ready=LogLine(node.tmp / "disk" / "sleeper.log",
                                                                "^up$"))
    d.start()
    assert node.run_inside(["touch", "/run/volatile"]).returncode == 0
    node.power_off()
    assert d.reap() == -9
    assert not pid_alive(d.pid)
    assert list((node.tmp / "run").iterdir()) == []
    assert (node.tmp / "disk" / "kept").read_text() == "x"
    node.boot()
    assert node.run_inside(["true"]).returncode == 0


def test_teardown_reports_what_it_could_not_undo() -> None:
    made = Small.make()
    made.boot()
    outside = made.tmp / "disk" / "mnt"
    outside.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(outside)], check=True)
    try:
        problems = made.teardown()
        assert len(problems) == 1 and "_remove_tmp" in problems[0], problems
        assert made.tmp.exists()
    finally:
        subprocess.run(["umount", str(outside)], check=True)
        assert made.teardown() == []


@dataclass
class Networked(Small):
    net: ClassVar[bool] = True


def test_a_node_with_a_network_of_its_own_has_lo_up_and_nothing_of_the_hosts() -> None:
    made = Networked.make()
    try:
        made.boot()
        assert made.holder is not None
        assert os.readlink(f"/proc/{made.holder.pid}/ns/net") != os.readlink("/proc/self/ns/net")
        links = made.run_inside(["ip", "-o", "link", "show"]).stdout.splitlines()
        assert len(links) == 1 and " lo: " in links[0] and "UP" in links[0], links
    finally:
        assert made.teardown() == []


@dataclass
class Kubeadmish(Small):
    own: ClassVar[tuple[tuple[str, str], ...]] = (
        ("run", "/run"), ("cni-bin", "/opt/dgtn-missing/cni/bin"),
        ("etc/config.toml", "/etc/dgtn-missing/config.toml"))

    @classmethod
    def make(cls, prefix: str | None = None, **fields: object) -> Kubeadmish:
        node = super().make(prefix, **fields)
        (node.tmp / "etc" / "config.toml").rmdir()  # a file's bind: the node's file
        (node.tmp / "etc" / "config.toml").write_text("node's\n")
        return node


def test_a_mount_point_the_host_lacks_is_made_where_only_the_node_sees_it() -> None:
    assert not os.path.exists("/opt/dgtn-missing") and not os.path.exists("/etc/dgtn-missing")
    made = Kubeadmish.make()
    try:
        made.boot()
        assert made.run_inside(["touch", "/opt/dgtn-missing/cni/bin/plugin"]).returncode == 0
        assert (made.tmp / "cni-bin" / "plugin").exists()
        shown = made.run_inside(["cat", "/etc/dgtn-missing/config.toml"])
        assert shown.stdout == "node's\n", shown
        assert not os.path.exists("/opt/dgtn-missing") and not os.path.exists("/etc/dgtn-missing")
        made.power_off()
        made.boot()  # a new overlay dir for the new namespace
        assert made.run_inside(["test", "-e", "/opt/dgtn-missing/cni/bin/plugin"]).returncode == 0
    finally:
        assert made.teardown() == []
    assert not os.path.exists("/opt/dgtn-missing")
