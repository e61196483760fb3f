"""Which conf file the runtime loads, and reading it strictly.

libcni (containerd, CRI-O) loads the files of the conf dir whose extension is `.conf`, `.conflist`
or `.json`, sorted by name, and uses the first one; a `.conflist` is a plugin list, the others a
single plugin. Reading is strict on purpose: a duplicate key or a NaN would not survive a rewrite
unchanged, so such a file is refused rather than patched.
"""

from __future__ import annotations

import json
import os
from typing import Any

from cni_delguard.node import fsops
from cni_delguard.node.errors import ConfRefusedError, NoConfError, WrapUnknownError

__all__ = ["ConfError", "NoConfError", "WrapUnknownError"]
from cni_delguard.state import fsutil

EXTENSIONS = (".conf", ".conflist", ".json")
LIST_EXTENSION = ".conflist"
# The file multus (thin and thick) writes for itself: `.conflist` when its master network is a
# cniVersion 1.0.0 conflist (multus 4), `.conf` otherwise.
MULTUS_CONFS = ("00-multus.conf", "00-multus.conflist")
MULTUS_TYPES = {"multus": "multus thin", "multus-shim": "multus thick"}
GUARD = "cni-delguard"


class ConfError(ConfRefusedError):
    """A conf file cannot be patched as it is."""


def conf_files(conf_dir: str) -> list[str]:
    """The conf dir's candidate files in the order libcni sorts them (names only)."""
    try:
        names = os.listdir(conf_dir)
    except FileNotFoundError:
        raise NoConfError(f"conf dir {conf_dir} does not exist") from None
    return sorted(
        n
        for n in names
        if os.path.splitext(n)[1] in EXTENSIONS and not os.path.isdir(os.path.join(conf_dir, n))
    )


def pick(conf_dir: str, name: str | None) -> str:
    """The path of the conf to patch: `name` if given, else the one the runtime would use."""
    if name is not None:
        if not name or "/" in name or name in (".", ".."):
            raise ConfError(f"--conf-file must be a file name in the conf dir, not {name!r}")
        if os.path.splitext(name)[1] not in EXTENSIONS:
            raise ConfError(f"{name}: the runtime loads only {', '.join(EXTENSIONS)} files")
        path = os.path.join(conf_dir, name)
        if not os.path.lexists(path):
            raise NoConfError(f"{path} does not exist")
        return path
    files = conf_files(conf_dir)
    if not files:
        raise NoConfError(
            f"no {'/'.join(EXTENSIONS)} file in {conf_dir}; "
            f"is the network plugin installed? (--wait SECONDS waits for it)"
        )
    return os.path.join(conf_dir, files[0])


def multus_master(conf_dir: str) -> str | None:
    """The file multus auto-detection reads as its master network: the first conf that is not
    its own 00-multus.conf(list) (None when there is no such file)."""
    files = conf_files(conf_dir)
    if not any(n in MULTUS_CONFS for n in files):
        return None
    return next((n for n in files if n not in MULTUS_CONFS), None)


def detect(path: str, conf: dict[str, Any]) -> tuple[str, str]:
    """The multus plugin in a conf (through a guard entry too): its type, and what was found
    ("multus thick (multus-shim) in 00-multus.conflist"). No multus: WrapUnknownError."""
    entries = [conf] if not is_list(path) else conf.get("plugins")
    types = []
    for entry in entries if isinstance(entries, list) else []:
        kind = entry.get("type") if isinstance(entry, dict) else None
        delegate = entry.get("delegate") if isinstance(entry, dict) else None
        if kind == GUARD and isinstance(delegate, dict):
            kind = delegate.get("type")
        types.append(kind)
    found = [t for t in types if t in MULTUS_TYPES]
    name = os.path.basename(path)
    if len(found) != 1:
        what = "no multus" if not found else f"{len(found)} multus plugins"
        raise WrapUnknownError(
            f"{path}: found {what} (plugin types: {', '.join(map(repr, types)) or 'none'}); "
            f"pass --wrap TYPE to name the plugin to guard"
        )
    return found[0], f"{MULTUS_TYPES[found[0]]} ({found[0]}) in {name}"


def is_list(path: str) -> bool:
    return path.endswith(LIST_EXTENSION)


def read(path: str) -> fsutil.FileInfo:
    try:
        return fsutil.read_regular(None, path, fsops.MAX_CONF)
    except fsutil.UnsafeFileError as exc:
        raise ConfError(f"{path}: {exc.strerror}; refusing to patch it") from None
    except FileNotFoundError:
        raise NoConfError(f"{path} does not exist") from None


def parse(path: str, data: bytes) -> dict[str, Any]:
    """A conf file's bytes -> its JSON object, refusing anything a rewrite would not keep."""
    try:
        value = json.loads(
            data.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constant
        )
    except UnicodeDecodeError:
        raise ConfError(f"{path} is not UTF-8") from None
    except ValueError as exc:
        raise ConfError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ConfError(f"{path} does not hold a JSON object")
    return value


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"duplicate key {key!r}")
        obj[key] = value
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def render(conf: dict[str, Any]) -> bytes:
    """How the installer writes a conf: two-space indent, key order kept, newline at the end."""
    return (json.dumps(conf, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
