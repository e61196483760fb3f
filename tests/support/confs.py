"""The guard's config and the stale fake's, built once for every suite.

Each bench (unit Node, process tests, conformance Lab, reliability Bench, containerd scenarios)
puts the guard's files somewhere of its own; these builders only spell the keys. A path left as
None leaves its key out, so the guard's defaults apply (tests that mean to use them say so).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PathLike = Path | str


def _dirs(paths: list[PathLike] | tuple[PathLike, ...]) -> list[str]:
    return [str(p) for p in paths]


def guard_plugin(
    delegate: Any,
    *,
    state_dir: PathLike | None = None,
    log_file: PathLike | None = None,
    result_cache_dirs: list[PathLike] | tuple[PathLike, ...] | None = None,
    multus_cache_dirs: list[PathLike] | tuple[PathLike, ...] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The guard's entry in a conflist; `extra` (any other key) is added last and wins."""
    conf: dict[str, Any] = {"type": "cni-delguard", "delegate": delegate}
    if state_dir is not None:
        conf["stateDir"] = str(state_dir)
    if log_file is not None:
        conf["logFile"] = str(log_file)
    if result_cache_dirs is not None:
        conf["resultCacheDirs"] = _dirs(result_cache_dirs)
    if multus_cache_dirs is not None:
        conf["multusCacheDirs"] = _dirs(multus_cache_dirs)
    return conf | extra


def guard_conf(
    delegate: Any, *, network: str = "net1", version: str = "1.0.0", **plugin: Any
) -> dict[str, Any]:
    """The guard's whole stdin as a runtime hands it over (one plugin: name and cniVersion set)."""
    entry = guard_plugin(delegate, **plugin)
    return {"cniVersion": version, "name": network} | entry


def stale_delegate(
    state_dir: PathLike, record: PathLike, plugin_type: str = "stale-delegate", **knobs: Any
) -> dict[str, Any]:
    """The config of tests/fakes/stale_delegate.py (its knobs are listed in its header)."""
    return {"type": plugin_type, "stateDir": str(state_dir), "recordFile": str(record)} | knobs
