"""The suite leaves the guard's default dirs on the host alone (tests/support/hostdefaults.py).

A guard given a config it cannot read logs to its default logFile, /var/log/cni-delguard: the
process fuzz did that on every run, and the check of the day compared only the dir's mtime and
link count, so on a fresh machine the suite errored, and on any other machine an append went
unnoticed. Here the frozen guard falls back to its defaults inside the session (its tmpfs gets
the line, the host nothing), and the check is shown to see an append, a touch, a new and a
removed file (each made by the frozen guard where it can be), and to fail when it cannot read.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import guard, holder
from tests.support.hostdefaults import changes, snapshot

ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="the session's namespace is made as root")
DEFAULT_LOG = Path("/var/log/cni-delguard/delguard.log")
REPO = Path(__file__).resolve().parents[1]
OTHER = 65534  # nobody


@pytest.fixture
def frozen_bin(tmp_path: Path) -> Path:
    guard.frozen_or_skip()
    d = tmp_path / "bin"
    d.mkdir()
    guard.install_guard(d)
    return d


def garbage_del(bin_dir: Path, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[bytes]:
    """A DEL whose stdin is no config: the guard skips it and logs to its default logFile."""
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "CNI_COMMAND": "DEL",
        "CNI_CONTAINERID": "hostdefaults-0123",
        "CNI_IFNAME": "eth0",
        "CNI_NETNS": "/proc/self/ns/net",
        "CNI_PATH": str(bin_dir),
    }
    return subprocess.run(
        [*prefix, str(bin_dir / "cni-delguard")],
        input=b"not a config",
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )


def lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


@ROOT
def test_a_guard_on_its_defaults_writes_the_sessions_tmpfs_not_the_hosts(frozen_bin):
    host_before = snapshot()
    seen_before = lines(DEFAULT_LOG)  # the session's /var/log (a tmpfs): what the guard sees
    proc = garbage_del(frozen_bin)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert lines(DEFAULT_LOG) == seen_before + 1, "the guard did not fall back to its default log"
    assert snapshot() == host_before


@ROOT
def test_the_check_sees_what_the_guard_does_to_an_existing_log(frozen_bin, tmp_path):
    """The guard's own writes into a host's default dirs, made on a stand-in for the host (a
    tmp dir bound over /var/log in a mount namespace of the guard's own), seen by snapshot()
    through that stand-in's root; the second DEL appends to a log that exists already, which
    the check of the day missed (same dir mtime and link count)."""
    host = tmp_path / "host"
    (host / "var/log").mkdir(parents=True)
    prefix = tuple(holder.once([(host / "var/log", "/var/log")], []))
    root_fd = os.open(host, os.O_RDONLY | os.O_DIRECTORY)
    try:
        empty = snapshot(root_fd)
        assert empty == {"var/lib/cni/delguard": None, "var/log/cni-delguard": None}
        assert garbage_del(frozen_bin, prefix).returncode == 0
        created = snapshot(root_fd)
        assert changes(empty, created)[0].startswith("/var/log/cni-delguard: absent -> mode 4")
        assert garbage_del(frozen_bin, prefix).returncode == 0
        appended = snapshot(root_fd)
        grown = changes(created, appended)
        assert any(line.startswith("/var/log/cni-delguard/delguard.log: ") for line in grown)
        log = host / "var/log/cni-delguard/delguard.log"
        os.utime(log, ns=(1, 1))  # same size, another mtime
        assert changes(appended, snapshot(root_fd)) != []
        touched = snapshot(root_fd)
        (log.parent / "delguard.log.1").write_text("")
        assert "/var/log/cni-delguard/delguard.log.1: absent -> " in "\n".join(
            changes(touched, snapshot(root_fd))
        )
    finally:
        os.close(root_fd)


def snapshot_as(host: Path) -> str:
    """snapshot() of `host` run as another user than root (root may list every dir): uid 65534
    when the test runs as root, else the test's own user. Its repr, or "cannot tell: ..."."""
    code = (
        f"import os, sys; sys.path.insert(0, {str(REPO)!r})\n"
        "from tests.support.hostdefaults import CannotTellError, snapshot\n"
        # Imported first (the interpreter and the repo may be closed to that user), then dropped.
        f"if os.geteuid() == 0: os.setgroups([]); os.setgid({OTHER}); os.setuid({OTHER})\n"
        "fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)\n"
        "try:\n"
        "    print(sorted(snapshot(fd)))\n"
        "except CannotTellError as exc:\n"
        "    print('cannot tell:', exc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-c", code, str(host)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.fixture
def host() -> Iterator[Path]:
    """A stand-in for a host's root that another user may enter (tmp_path is root's 0700)."""
    with tempfile.TemporaryDirectory(prefix="hostdefaults-") as top:
        root = Path(top) / "host"
        (root / "var/log/cni-delguard").mkdir(parents=True)
        for d in (Path(top), root, root / "var", root / "var/log"):
            d.chmod(0o755)
        yield root


def test_the_check_fails_when_it_cannot_list_a_dir_it_could_be_written_through(host):
    blind = host / "var/log/cni-delguard"
    if os.geteuid() == 0:
        os.chown(blind, OTHER, OTHER)
    blind.chmod(0o300)  # -wx: files can be made in it, but it cannot be listed
    try:
        said = snapshot_as(host)
    finally:
        blind.chmod(0o700)
    assert said.startswith("cannot tell: cannot list /var/log/cni-delguard"), said


def test_a_dir_closed_to_this_user_both_ways_is_compared_by_its_own_entry(host):
    """/var/log/cni-delguard as the guard makes it (root's, 0750) seen by another user: not
    listable and not writable, so nothing run as that user changes what is inside."""
    closed = host / "var/log/cni-delguard"
    (closed / "delguard.log").write_text("x\n")
    if os.geteuid() != 0:
        pytest.skip("needs a dir of another user's: root makes one")
    closed.chmod(0o750)
    said = snapshot_as(host)
    assert said == "['var/lib/cni/delguard', 'var/log/cni-delguard']", said
