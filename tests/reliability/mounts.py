"""Mounts the state-dir tests make: a tiny tmpfs (to fill), a read-only remount; always undone."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, timeout=30)


def _umount(path: Path) -> None:
    res = subprocess.run(["umount", str(path)], check=False, capture_output=True, timeout=30)
    if res.returncode != 0:  # busy: detach lazily rather than leave it behind
        subprocess.run(["umount", "-l", str(path)], check=True, capture_output=True, timeout=30)


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "256k", inodes: int | None = None) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size},mode=0700"
    if inodes is not None:
        opts += f",nr_inodes={inodes}"
    _mount("-t", "tmpfs", "-o", opts, "reliability-tmpfs", str(path))
    try:
        yield path
    finally:
        _umount(path)


def remount_ro(path: Path) -> None:
    _mount("-o", "remount,ro", str(path))


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
