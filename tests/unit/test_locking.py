"""The per-attachment lock: bounded waits, no symlinks, safe removal of the lock file."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from cni_delguard.cni import errors
from cni_delguard.state.locking import AttachmentLock

HOLD = """
import sys, time
sys.path.insert(0, {repo!r})
from cni_delguard.state.locking import AttachmentLock
lock = AttachmentLock({path!r}, 5)
print("held", flush=True)
sys.stdin.readline()
{remove}
lock.release()
"""


def _holder(path, remove=False):
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = HOLD.format(repo=repo, path=str(path), remove="lock.remove()" if remove else "")
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_held_lock_times_out_with_try_again_later(tmp_path):
    path = tmp_path / "a.lock"
    holder = _holder(path)
    try:
        start = time.monotonic()
        with pytest.raises(errors.CniError) as exc:
            AttachmentLock(str(path), timeout=0.3)
        assert exc.value.code == errors.TRY_AGAIN_LATER
        assert time.monotonic() - start < 5
    finally:
        holder.communicate("\n")


def test_different_attachments_do_not_wait_on_each_other(tmp_path):
    holder = _holder(tmp_path / "a.lock")
    try:
        with AttachmentLock(str(tmp_path / "b.lock"), timeout=0.0):
            pass
    finally:
        holder.communicate("\n")


def test_a_waiter_survives_the_holder_removing_the_lock_file(tmp_path):
    """The holder unlinks the file while holding it; the waiter must end up holding the file
    that exists at the path, not the removed inode."""
    path = tmp_path / "a.lock"
    holder = _holder(path, remove=True)
    seen: list[tuple[int, int, int]] = []

    def wait_and_look() -> None:
        lock = AttachmentLock(str(path), timeout=5)
        fd = lock.held_fd()
        seen.append((os.fstat(fd).st_ino, os.stat(path).st_ino, os.fstat(fd).st_nlink))
        lock.release()

    waiter = threading.Thread(target=wait_and_look)
    waiter.start()
    time.sleep(0.1)
    holder.communicate("\n")
    waiter.join(10)
    assert seen, "waiter never acquired the lock"
    held_ino, path_ino, nlink = seen[0]
    assert held_ino == path_ino
    assert nlink == 1


def test_a_symlinked_lock_file_is_not_followed(tmp_path):
    target = tmp_path / "target"
    target.write_text("keep")
    os.symlink(target, tmp_path / "a.lock")
    with pytest.raises(errors.CniError) as exc:
        AttachmentLock(str(tmp_path / "a.lock"), timeout=0.1)
    assert exc.value.code == errors.IO_FAILURE
    assert target.read_text() == "keep"


def test_lock_files_are_owner_only(tmp_path):
    with AttachmentLock(str(tmp_path / "a.lock"), timeout=1) as lock:
        assert (os.stat(lock.path).st_mode & 0o777) == 0o600


def test_no_lock_library_is_imported_held_or_waiting(tmp_path):
    """The uncontended path is one flock, the contended one a polled flock: neither imports
    filelock (~30 ms of imports: logging, inspect, dataclasses), whose API takes a path only."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = tmp_path / "a.lock"
    code = (
        f"import sys; sys.path.insert(0, {repo!r})\n"
        "import contextlib\n"
        "from cni_delguard.state.locking import AttachmentLock\n"
        f"with contextlib.suppress(Exception): AttachmentLock({str(path)!r}, 0.1).release()\n"
        "print('filelock' in sys.modules)\n"
    )
    for busy in (False, True):
        holder = _holder(path) if busy else None
        try:
            out = subprocess.run(
                [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
            )
        finally:
            if holder is not None:
                holder.communicate("\n")
        assert out.stdout.strip() == "False", busy


def test_the_lock_is_opened_and_removed_in_the_dir_it_was_given(tmp_path):
    """By the dir's descriptor, never by the path: a network dir swapped for a link after the
    lock was taken does not make remove() unlink the file the link leads to."""
    net = tmp_path / "networks" / "net1"
    net.mkdir(parents=True)
    decoy = tmp_path / "decoy" / "net1"
    decoy.mkdir(parents=True)
    (decoy / "c1:eth0.lock").write_text("not the guard's")
    dir_fd = os.open(net, os.O_RDONLY | os.O_DIRECTORY)
    try:
        lock = AttachmentLock(str(net / "c1:eth0.lock"), timeout=1, dir_fd=dir_fd)
        os.rename(tmp_path / "networks", tmp_path / "moved")
        os.symlink(tmp_path / "decoy", tmp_path / "networks")
        lock.remove()
        lock.release()
    finally:
        os.close(dir_fd)
    assert (decoy / "c1:eth0.lock").read_text() == "not the guard's"
    assert not (tmp_path / "moved" / "net1" / "c1:eth0.lock").exists()


def test_a_lock_path_is_walked_never_through_a_link(tmp_path):
    """Without a dir descriptor the lock's dir is reached by the no-follow walk (fsutil.walk)."""
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(errors.CniError) as exc:
        AttachmentLock(str(tmp_path / "link" / "a.lock"), timeout=0.1)
    assert exc.value.code == errors.IO_FAILURE
    assert list((tmp_path / "real").iterdir()) == []
