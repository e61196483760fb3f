"""host/root.py: NodeRoot's rules, one case each: no path leaves the root after normalisation;
a read refuses a link at any component below the root; the node's links are followed only when
asked (`resolve`), and then inside the root; a process's root is nested and keeps its paths."""

from __future__ import annotations

import os

import pytest

from cni_delguard.host.root import NodeRoot, OutsideRootError, absolute
from cni_delguard.state.fsutil import UnsafeFileError
from cni_delguard.tooling import UsageError


def plant(root, path: str, text: str | None = None):
    where = root / path.lstrip("/")
    if text is None:
        where.mkdir(parents=True, exist_ok=True)
    else:
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(text)
    return where


@pytest.mark.parametrize(
    ("root", "path", "expected"),
    [
        pytest.param("/", "/var/lib/cni/delguard", "/var/lib/cni/delguard", id="host"),
        pytest.param("/host", "/var/lib/cni/delguard", "/host/var/lib/cni/delguard", id="plain"),
        pytest.param("/host", "/../var/lib/cni/delguard", "/host/var/lib/cni/delguard",
                     id="dotdot-at-the-top"),
        pytest.param("/host", "/var/../../../etc", "/host/etc", id="dotdot-past-the-top"),
        pytest.param("/host/", "//var//lib/./cni", "/host/var/lib/cni", id="slashes-and-dots"),
        pytest.param("/host", "/", "/host", id="the-root-itself"),
        pytest.param("/host/../node", "/x", "/node/x", id="root-normalized-too"),
    ],
)
def test_here_keeps_the_path_under_the_root(root, path, expected):
    assert NodeRoot(root).here(path) == expected


def test_a_relative_root_is_taken_from_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert NodeRoot("node").here("/../etc") == os.path.join(tmp_path, "node", "etc")


@pytest.mark.parametrize("path", ["var/lib", "", "../x", "/var/\0lib"])
def test_a_path_that_is_not_absolute_is_a_usage_error(path):
    with pytest.raises(UsageError, match="must be an absolute path"):
        NodeRoot("/host").here(path)


def test_absolute_normalizes_as_the_guard_reads_its_config():
    assert absolute("/../var/lib/cni/delguard/") == "/var/lib/cni/delguard"


@pytest.mark.parametrize(
    ("root", "here", "expected"),
    [
        pytest.param("/host", "/host/opt/cni/bin", "/opt/cni/bin", id="under"),
        pytest.param("/host", "/host", "/", id="the-root"),
        pytest.param("/host", "/hostile/x", None, id="a-sibling-with-the-same-prefix"),
        pytest.param("/host", "/host/../etc", None, id="climbs-out"),
        pytest.param("/", "/etc/x", "/etc/x", id="host"),
    ],
)
def test_on_node_is_here_inverted(root, here, expected):
    assert NodeRoot(root).on_node(here) == expected


@pytest.mark.parametrize(
    ("link", "target", "path", "expected"),
    [
        pytest.param("a/cur", "/a/rev", "/a/cur/bin", "a/rev/bin", id="absolute-link"),
        pytest.param("a/cur", "rev", "/a/cur/bin", "a/rev/bin", id="relative-link"),
        pytest.param("a/cur", "../../../../a/rev", "/a/cur/bin", "a/rev/bin",
                     id="dotdot-stops-at-the-root"),
        pytest.param("a/cur", "/", "/a/cur/etc", "etc", id="link-to-the-root"),
        pytest.param("a/cur", "/a/rev", "/a/cur/missing/deeper", "a/rev/missing/deeper",
                     id="missing-tail"),
    ],
)
def test_located_follows_the_nodes_links_inside_the_root(tmp_path, link, target, path, expected):
    plant(tmp_path, "/a/rev/bin")
    (tmp_path / link).symlink_to(target)
    assert NodeRoot(str(tmp_path)).located(path) == os.path.join(tmp_path, expected).rstrip("/")


def test_located_is_here_where_there_is_no_link(tmp_path):
    plant(tmp_path, "/etc/cni/net.d")
    root = NodeRoot(str(tmp_path))
    for path in ("/etc/cni/net.d", "/etc/cni/../cni/net.d/", "/nothing/here"):
        assert root.located(path) == root.here(path)


def test_resolve_at_the_hosts_root_follows_links_as_anywhere(tmp_path):
    """At `/` the node is the host: its links are followed the same way (one rule)."""
    plant(tmp_path, "/a/rev/bin")
    (tmp_path / "a/cur").symlink_to(tmp_path / "a/rev")
    assert NodeRoot("/").resolve(f"{tmp_path}/a/cur/bin") == f"{tmp_path}/a/rev/bin"


def test_resolve_refuses_a_loop(tmp_path):
    (tmp_path / "loop").symlink_to("/loop")
    with pytest.raises(OutsideRootError, match="too many levels"):
        NodeRoot(str(tmp_path)).located("/loop/x")


def test_read_reads_a_regular_file_bounded(tmp_path):
    plant(tmp_path, "/etc/x.json", "{}")
    plant(tmp_path, "/etc/big", "x" * 100)
    root = NodeRoot(str(tmp_path))
    assert root.read("/etc/x.json", 10) == b"{}"
    with pytest.raises(UnsafeFileError, match="larger than 10 bytes"):
        root.read("/etc/big", 10)


@pytest.mark.parametrize(
    "link",
    [
        pytest.param("etc", id="first-component"),
        pytest.param("etc/cni", id="middle-component"),
        pytest.param("etc/cni/net.d/x.conf", id="last-component"),
    ],
)
def test_read_refuses_a_link_at_any_component(tmp_path, link):
    """The node's tree elsewhere holds the file; a link on the way to it is refused, wherever
    it is, even one whose target is inside the root."""
    plant(tmp_path, "/real/etc/cni/net.d/x.conf", "{}")
    real = tmp_path / "real" / link
    if "/" in link:
        plant(tmp_path, "/" + os.path.dirname(link))
    (tmp_path / link).symlink_to(os.path.relpath(real, (tmp_path / link).parent))
    root = NodeRoot(str(tmp_path))
    with pytest.raises(UnsafeFileError, match=r"a link or not a directory|symlink"):
        root.read("/etc/cni/net.d/x.conf", 100)
    assert root.read_or_none("/etc/cni/net.d/x.conf", 100) is None
    # the same file, its link followed as the node would (asked for), is read
    assert root.read(root.resolve("/etc/cni/net.d/x.conf"), 100) == b"{}"


def test_read_refuses_a_normalised_escape(tmp_path):
    """`/../..` stops at the root: a file beside the root is never read."""
    node = tmp_path / "node"
    plant(node, "/etc/secret", "node's")
    plant(tmp_path, "/etc/secret", "beside the root")
    root = NodeRoot(str(node))
    assert root.read("/../../etc/secret", 100) == b"node's"
    assert root.here("/../../etc/secret") == str(node / "etc/secret")


def test_read_never_waits_on_a_fifo(tmp_path):
    plant(tmp_path, "/etc")
    os.mkfifo(tmp_path / "etc/fifo")
    with pytest.raises(UnsafeFileError, match="not a regular file"):
        NodeRoot(str(tmp_path)).read("/etc/fifo", 100)


def test_a_process_root_keeps_its_paths(tmp_path):
    """/proc/PID/root of a process is a root of its own: a `-config /../../etc/x` read from that
    process names its own /etc/x, never the node's, never a file beside its root."""
    node = tmp_path / "node"
    proc_root = plant(node, "/proc/42/root")
    plant(proc_root, "/etc/multus/daemon-config.json", '{"in": "the process"}')
    plant(node, "/etc/multus/daemon-config.json", '{"in": "the node"}')
    root = NodeRoot(str(node))
    proc = root.process(42)
    assert proc.through_process and not proc.is_host
    assert proc.here("/../../etc/multus/daemon-config.json") == str(
        proc_root / "etc/multus/daemon-config.json")
    assert proc.read("/../../etc/multus/daemon-config.json", 100) == b'{"in": "the process"}'


def test_a_process_root_is_entered_through_its_one_link_only(tmp_path):
    """The real /proc/PID/root is a link, followed (the one link meant); a link at /proc or at
    the PID on the way is refused."""
    node = tmp_path / "node"
    elsewhere = plant(tmp_path, "/elsewhere")
    plant(elsewhere, "/etc/x", "x")
    plant(node, "/proc/7")
    (node / "proc/7/root").symlink_to(elsewhere)
    assert NodeRoot(str(node)).process(7).read("/etc/x", 10) == b"x"
    (node / "proc/8").symlink_to(node / "proc/7")
    with pytest.raises(UnsafeFileError):
        NodeRoot(str(node)).process(8).read("/etc/x", 10)


def test_a_real_process_root_reads_that_process_files():
    """Our own /proc/self/root is `/`: reading through it reads this machine's files."""
    mine = NodeRoot("/").process(os.getpid())
    with open("/etc/hostname", "rb") as f:
        assert mine.read("/proc/self/../../etc/hostname", 4096) == f.read()


@pytest.mark.parametrize("pid", [0, -1, True, "1"])
def test_a_process_is_a_positive_number(pid):
    with pytest.raises(OutsideRootError):
        NodeRoot("/host").process(pid)


def test_head_reads_only_the_start(tmp_path):
    plant(tmp_path, "/bin/tool", "#!/bin/sh\n" + "x" * 10000)
    root = NodeRoot(str(tmp_path))
    assert root.head("/bin/tool", 10) == b"#!/bin/sh\n"
    assert root.head("/bin/none", 10) == b""
