"""Mounts the state-dir tests make: a tiny tmpfs (to fill), a read-only remount; always undone."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from tests.support.mounts import mount, umount


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "256k", inodes: int | None = None) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size},mode=0700"
    if inodes is not None:
        opts += f",nr_inodes={inodes}"
    mount("-t", "tmpfs", "-o", opts, "reliability-tmpfs", str(path))
    try:
        yield path
    finally:
        umount(path)


def remount_ro(path: Path) -> None:
    mount("-o", "remount,ro", str(path))


def fill(directory: Path) -> int:
    """Fill the file system of `directory` with data until ENOSPC; return the bytes written."""
    written = 0
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        chunk = b"\0" * 4096
        while True:
            try:
                written += os.write(fd, chunk)
            except OSError:
                break
    finally:
        os.close(fd)
    return written


def use_up_inodes(directory: Path) -> int:
    """Create empty files until no inode is left; return how many."""
    made = 0
    while True:
        try:
            os.close(os.open(directory / f"inode-{made}", os.O_WRONLY | os.O_CREAT, 0o600))
        except OSError:
            return made
        made += 1
