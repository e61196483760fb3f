"""The verdict cache: a config that passed validation once is not validated by pydantic again.

A verdict is `<stateDir>/verdicts/<digest>.json`, keyed by config.digest (the config minus the
keys the runtime changes on every call, the defaults it was completed with, the guard's version).
pydantic costs ~100 ms of every exec that imports it; the verdict is what spares later execs that.

It is not a trust boundary. `stateDir` is the config's, and a config's author who can also run a
uid-0 pod can point it at a dir that pod writes (its overlay's upper dir is root's, under
/var/lib), so a verdict may have been rewritten by anyone. What the guard uses is therefore never
the file's content: the settings are derived again from the config itself, field by field through
the same rules as the schema (fields.py), and the file counts only when it is root's own (owned by
our euid, not writable by group or others, one link, reached by fsutil.walk) and says exactly
those settings. Anything else, a file that cannot be read included, means: no verdict, validate
afresh and write it again. A forged verdict can thus at most spare pydantic for a config whose
every field already passed its rule.
"""

from __future__ import annotations

import os

from cni_delguard.cni import errors, jsonlite
from cni_delguard.guard import fields
from cni_delguard.state import fsutil

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VERDICT_DIR = "verdicts"
_SUFFIX = ".json"
_KEEP = 32


def read(state_dir: str, key: str, conf: dict[str, Any], filled: dict[str, Any]) -> Any:
    """The settings of `conf` (completed with `filled`) when a trusted verdict `key` says
    exactly them; None otherwise."""
    stored = _trusted(state_dir, key)
    if stored is None:
        return None
    try:
        derived = fields.settings(conf, filled)
        found = jsonlite.loads(stored)
    except (ValueError, TypeError, KeyError, RecursionError):
        return None
    if _canonical(found) != _canonical(derived):
        return None
    return derived


def _canonical(value: object) -> str:
    """One text per value: 1 and 1.0, true and 1, key order all tell apart or alike as JSON."""
    return jsonlite.dumps(value, sort_keys=True, compact=True)


def _trusted(state_dir: str, key: str) -> bytes | None:
    try:
        fd = fsutil.walk(os.path.join(state_dir, VERDICT_DIR))
    except (OSError, errors.CniError):
        return None
    try:
        info = fsutil.read_regular(fd, key + _SUFFIX)
    except OSError:
        return None
    finally:
        os.close(fd)
    return info.data if info.distrust() is None else None


def write(state_dir: str, key: str, settings: dict[str, Any], make_state_dir: bool) -> None:
    """Store a verdict; a failure costs only a later validation (a read-only state dir). The
    state dir is created only when config.missing_dirs found it may be (paths.creatable)."""
    try:
        root = fsutil.walk(state_dir, create=make_state_dir)
        try:
            fd = fsutil.open_subdir(root, VERDICT_DIR, os.path.join(state_dir, VERDICT_DIR))
        finally:
            os.close(root)
        try:
            fsutil.write_atomic(fd, key + _SUFFIX, jsonlite.dumps(settings).encode())
        finally:
            os.close(fd)
    except (OSError, errors.CniError):
        return
    fsutil.prune_oldest(os.path.join(state_dir, VERDICT_DIR), keep=_KEEP)
