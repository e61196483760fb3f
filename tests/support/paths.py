"""Widen the guard's path rule to the temp dirs, as a node's admin widens it.

The guard writes its state and log only under its built-in places (/var/lib, /run, /var/log:
cni_delguard/guard/paths.py); the temp dirs are not among them (issue 38: any local user can make
names there). The tests keep each node's state and log under a temp dir, so they put the admin's
settings file, `cni-delguard.paths`, in the bin dir they give as CNI_PATH: what a user does on a
node whose state lives elsewhere. The file is root's (the tests run as root), mode 0644, one link.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

SETTINGS_FILE = "cni-delguard.paths"  # guard/paths.py's SETTINGS_FILE, spelled out on purpose


def widen(bin_dir: Path | str, *more: str) -> Path:
    """`cni-delguard.paths` in `bin_dir` allowing state and logs under the temp dir (and each
    `kind dir` line of `more`); returns its path."""
    temp = os.path.realpath(tempfile.gettempdir())
    lines = [f"state {temp}", f"log {temp}", *more]
    path = Path(bin_dir) / SETTINGS_FILE
    path.write_text("# the tests' nodes keep state and logs in temp dirs\n" + "\n".join(lines)
                    + "\n")
    path.chmod(0o644)
    return path


_WIDENED: list[str] = []


def widened_dir() -> str:
    """A dir of this process's own holding only the settings file of `widen`: the CNI_PATH for
    in-process calls of the guard's config and log code whose files are under the temp dir."""
    if not _WIDENED:
        path = Path(tempfile.mkdtemp(prefix="delguard-widened-"))
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        widen(path)
        _WIDENED.append(str(path))
    return _WIDENED[0]
