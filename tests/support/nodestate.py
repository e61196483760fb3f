"""Planting the guard's state by hand (markers, locks, caches) for the operator tools' tests.

The layout is docs/DESIGN.md's "On-disk state"; markers carry issue 14's `pod` field when given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LIBCNI_RESULT = {"cniVersion": "1.0.0", "interfaces": [], "ips": []}


def net_dir(state: Path, network: str) -> Path:
    d = state / "networks" / network
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    state.chmod(0o700)
    return d


def marker(
    state: Path, network: str, cid: str, state_name: str, when: float,
    ifname: str = "eth0", pod: dict[str, str] | None = None, lock: bool = True,
) -> Path:
    d = net_dir(state, network)
    body: dict[str, Any] = {"state": state_name, "containerID": cid, "ifname": ifname,
                            "time": when}
    if pod is not None:
        body["pod"] = pod
    path = d / f"{cid}:{ifname}.json"
    path.write_text(json.dumps(body))
    if lock:
        (d / f"{cid}:{ifname}.lock").touch()
    return path


def libcni_result(results: Path, network: str, cid: str, ifname: str = "eth0") -> Path:
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{network}-{cid}-{ifname}"
    path.write_text(json.dumps({"kind": "cniCacheV1", "containerId": cid, "ifName": ifname,
                                "networkName": network, "config": "e30=",
                                "result": LIBCNI_RESULT}))
    return path


def log_lines(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
