"""Wrapping a conf around the guard, and unwrapping it again: pure functions on parsed JSON.

The wrapped plugin's config moves verbatim under `delegate`; the guard entry takes its place (in
a conflist, at the same position in the chain) and declares the delegate's `capabilities`, because
the runtime fills `runtimeConfig` only for the capabilities of the plugin it execs. A `.conf`
holds one plugin: the guard keeps the file's `cniVersion` and `name` and the whole original object
becomes the delegate. Anything ambiguous is refused, never guessed.
"""

from __future__ import annotations

import copy
from typing import Any

from cni_delguard.node.errors import ConfRefusedError

GUARD = "cni-delguard"
_MULTUS_DEFAULT_CNI_DIR = "/var/lib/cni/multus"


class PatchError(ConfRefusedError):
    """The conf cannot be patched safely; the message says why."""


def wrap(
    conf: dict[str, Any], is_list: bool, wrap_type: str, keys: dict[str, Any]
) -> dict[str, Any]:
    """The conf with the plugin of type `wrap_type` behind the guard (unchanged if already so)."""
    if not is_list:
        if conf.get("type") == GUARD:
            return _refresh(conf, wrap_type, keys)
        if conf.get("type") != wrap_type:
            raise PatchError(f"its plugin type is {conf.get('type')!r}, not {wrap_type!r}")
        head = {k: conf[k] for k in ("cniVersion", "name") if k in conf}
        return head | _guard_entry(conf, keys)
    plugins = _plugins(conf)
    index = _candidate(plugins, wrap_type)
    entry = plugins[index]
    new = _refresh(entry, wrap_type, keys) if entry["type"] == GUARD else _guard_entry(entry, keys)
    return conf | {"plugins": [*plugins[:index], new, *plugins[index + 1 :]]}


def unwrap(conf: dict[str, Any], is_list: bool) -> dict[str, Any] | None:
    """The conf with every guard entry replaced by its delegate; None if there is none."""
    if not is_list:
        if conf.get("type") != GUARD:
            return None
        delegate = _delegate_of(conf)
        head = {k: conf[k] for k in ("cniVersion", "name") if k in conf and k not in delegate}
        return head | delegate
    plugins = _plugins(conf)
    if not any(p.get("type") == GUARD for p in plugins):
        return None
    return conf | {"plugins": [_delegate_of(p) if p.get("type") == GUARD else p for p in plugins]}


def guard_plugins(conf: dict[str, Any], is_list: bool) -> list[dict[str, Any]]:
    """The guard entries of a conf (for validation and for 'is the guard still in use?')."""
    if not is_list:
        return [conf] if conf.get("type") == GUARD else []
    plugins = conf.get("plugins")
    if not isinstance(plugins, list):
        return []
    return [p for p in plugins if isinstance(p, dict) and p.get("type") == GUARD]


def _plugins(conf: dict[str, Any]) -> list[dict[str, Any]]:
    plugins = conf.get("plugins")
    if not isinstance(plugins, list) or not plugins:
        raise PatchError("it has no 'plugins' list")
    if not all(isinstance(p, dict) and isinstance(p.get("type"), str) for p in plugins):
        raise PatchError("one of its plugins is not an object with a 'type'")
    return plugins


def _candidate(plugins: list[dict[str, Any]], wrap_type: str) -> int:
    bare = [i for i, p in enumerate(plugins) if p["type"] == wrap_type]
    guarded = [i for i, p in enumerate(plugins) if p["type"] == GUARD]
    others = [i for i in guarded if _delegate_type(plugins[i]) != wrap_type]
    if others:
        raise PatchError(
            f"it already has a {GUARD} entry wrapping "
            f"{_delegate_type(plugins[others[0]])!r}, not {wrap_type!r}"
        )
    found = bare + guarded
    if not found:
        types = ", ".join(repr(p["type"]) for p in plugins)
        raise PatchError(f"it has no plugin of type {wrap_type!r} (its plugins: {types})")
    if len(found) > 1:
        raise PatchError(
            f"it has {len(found)} plugins of type {wrap_type!r}; cannot tell which one to wrap"
        )
    return found[0]


def _guard_entry(delegate: dict[str, Any], keys: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": GUARD}
    if "capabilities" in delegate:
        entry["capabilities"] = copy.deepcopy(delegate["capabilities"])
    entry |= _derived(delegate) | keys
    entry["delegate"] = delegate
    return entry


def _refresh(entry: dict[str, Any], wrap_type: str, keys: dict[str, Any]) -> dict[str, Any]:
    """An existing guard entry with the requested keys set and the delegate's capabilities."""
    delegate = _delegate_of(entry)
    if delegate.get("type") != wrap_type:
        raise PatchError(
            f"it is already wrapped around {delegate.get('type')!r}, not {wrap_type!r}"
        )
    new = _derived(delegate) | entry | keys
    if "capabilities" in delegate:
        new["capabilities"] = copy.deepcopy(delegate["capabilities"])
    else:
        new.pop("capabilities", None)
    return new


def _derived(delegate: dict[str, Any]) -> dict[str, Any]:
    """Guard keys that follow from the delegate: multus keeps its cache in its `cniDir`."""
    cni_dir = delegate.get("cniDir")
    if (
        delegate.get("type") == "multus"
        and isinstance(cni_dir, str)
        and cni_dir.startswith("/")
        and cni_dir.rstrip("/") != _MULTUS_DEFAULT_CNI_DIR
    ):
        return {"multusCacheDirs": [cni_dir]}
    return {}


def _delegate_of(entry: dict[str, Any]) -> dict[str, Any]:
    delegate = entry.get("delegate")
    if not isinstance(delegate, dict):
        raise PatchError(f"its {GUARD} entry has no 'delegate' object")
    return delegate


def _delegate_type(entry: dict[str, Any]) -> Any:
    delegate = entry.get("delegate")
    return delegate.get("type") if isinstance(delegate, dict) else None
