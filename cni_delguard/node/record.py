"""The record of a patched conf: its original bytes, so `uninstall` restores them byte for byte.

Kept in `<state-dir>/installer/` (0700), never in the conf dir, where any file with a conf
extension could be loaded by the runtime or taken by multus as its master network. Per conf file
(keyed by a digest of its absolute path):

    <key>.orig        the bytes the installer found before it patched the file
    <key>.json        {"path", "mode", "uid", "gid", "original", "patched"} (sha256 hex digests)

The record is written (and fsynced) before the conf is patched, so a crash in between leaves a
record whose original is still the file's content, which the next run simply rewrites.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass

from cni_delguard.node import fsops
from cni_delguard.state import fsutil

SUBDIR = "installer"


@dataclass(frozen=True)
class Record:
    path: str
    mode: int
    uid: int
    gid: int
    original: str  # sha256 of the original bytes
    patched: str  # sha256 of the bytes the installer wrote


def _base(state_dir: str, conf_path: str) -> str:
    key = fsutil.sha256_hex(os.path.abspath(conf_path).encode("utf-8", "surrogateescape"))[:32]
    return os.path.join(state_dir, SUBDIR, key)


def installer_dir(state_dir: str) -> str:
    """<stateDir>/installer, made if missing: both 0700 (the state dir is the guard's, which
    refuses one others can write; it is made here first, before the installer's subdir, so it
    never gets a parent's 0755) and checked like the guard checks it."""
    fsops.makedirs_private(state_dir)
    path = os.path.join(state_dir, SUBDIR)
    fsops.makedirs_private(path)
    return path


def save(state_dir: str, rec: Record, original: bytes) -> None:
    # The state dir is the guard's as well: 0700 as the guard makes it, whatever the umask.
    installer_dir(state_dir)
    base = _base(state_dir, rec.path)
    fsutil.write_file(base + ".orig", original, 0o600)
    fsutil.write_file(base + ".json", json.dumps(asdict(rec), indent=1).encode(), 0o600)


def load(state_dir: str, conf_path: str) -> tuple[Record, bytes] | None:
    """The record of `conf_path` and its original bytes; None if absent or unusable."""
    base = _base(state_dir, conf_path)
    try:
        meta = json.loads(fsutil.read_regular(None, base + ".json", fsops.MAX_CONF).data)
        original = fsutil.read_regular(None, base + ".orig", fsops.MAX_CONF).data
        rec = Record(**meta)
    except (OSError, ValueError, TypeError):
        return None
    if rec.path != os.path.abspath(conf_path) or fsutil.sha256_hex(original) != rec.original:
        return None  # damaged or not ours: a wrong restore would be worse than none
    return rec, original


def drop(state_dir: str, conf_path: str) -> None:
    base = _base(state_dir, conf_path)
    fsops.remove_quietly(base + ".json")
    fsops.remove_quietly(base + ".orig")


# The uninstall record: `uninstall` writes it (under the installer lock) before it restores
# anything, and every installer honours it: a running watcher stops wrapping, repairing and
# re-wrapping until an explicit `install` (a new pod's, or a person's) removes it.
UNINSTALLED = "uninstalled"


def mark_uninstalled(state_dir: str) -> None:
    installer_dir(state_dir)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    fsutil.write_file(os.path.join(state_dir, SUBDIR, UNINSTALLED), f"{stamp}\n".encode(), 0o600)


def uninstalled(state_dir: str) -> str | None:
    """When `uninstall` ran (its stamp), or None if no uninstall is in force."""
    path = os.path.join(state_dir, SUBDIR, UNINSTALLED)
    try:
        return fsutil.read_regular(None, path, 256).data.decode("ascii", "replace").strip()
    except FileNotFoundError:
        return None
    except OSError:
        return "(unreadable record)"  # something is there: honour it


def clear_uninstalled(state_dir: str) -> bool:
    path = os.path.join(state_dir, SUBDIR, UNINSTALLED)
    if not os.path.lexists(path):
        return False
    fsops.remove_quietly(path)
    return True
