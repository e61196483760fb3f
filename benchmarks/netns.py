"""Scenario b: ADD + DEL of bridge + host-local in a real netns, through the guard and alone.

Everything happens inside an outer network namespace made for the run (the "host" the bridge
lives in), so the machine's own network is untouched; the worker half of this module runs in
there under `ip netns exec`, and the namespaces and dirs are removed afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness import Command, Runner, Series
from benchmarks.subjects import CNI_LIB, cni_env, container_id, guard_conf, guard_state, plugin_conf

NETWORK = "dgbench"
SUBNET = "10.254.253.0/24"  # only ever configured inside the run's own namespaces

Pair = tuple[Command, Command]


def bridge(root: Path) -> dict[str, Any]:
    return {
        "type": "bridge",
        "bridge": "dgbench0",
        "isGateway": True,
        "ipMasq": False,
        "ipam": {"type": "host-local", "subnet": SUBNET, "dataDir": str(root / "ipam")},
    }


def pair(argv0: str, conf: bytes, cid: str, netns: str) -> Pair:
    def cmd(command: str) -> Command:
        return Command((argv0,), cni_env(command, cid, str(CNI_LIB), netns), conf)

    return cmd("ADD"), cmd("DEL")


def subjects(guard: str, root: Path, netns: str) -> dict[str, Callable[[int], Pair]]:
    delegate = bridge(root)
    alone = plugin_conf(NETWORK, delegate)
    cached = guard_conf(NETWORK, delegate, guard_state(root / "cached"))

    def bridge_alone(n: int) -> Pair:
        return pair(str(CNI_LIB / "bridge"), alone, container_id("alone", n), netns)

    def guard_cached(n: int) -> Pair:
        return pair(guard, cached, container_id("cached", n), netns)

    def guard_first(n: int) -> Pair:
        fresh = guard_conf(NETWORK, delegate, guard_state(root / f"fresh{n + 100}"))
        return pair(guard, fresh, container_id("first", n), netns)

    return {
        "bridge alone": bridge_alone,
        "guard, verdict cached": guard_cached,
        "guard, first ADD after config change": guard_first,
    }


def measure_rounds(
    runner: Runner, subj: dict[str, Callable[[int], Pair]], runs: int
) -> dict[str, Any]:
    series = {
        f"{name}: {part}": Series(name) for name in subj for part in ("ADD", "DEL", "ADD+DEL")
    }
    names = list(subj)
    for round_no in range(-3, runs):
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            add_cmd, del_cmd = subj[name](round_no)
            add, dele = runner.run(add_cmd), runner.run(del_cmd)
            if round_no < 0:
                continue
            series[f"{name}: ADD"].samples.append(add)
            series[f"{name}: DEL"].samples.append(dele)
            both = type(add)(
                add.ms + dele.ms,
                add.cpu_ms + dele.cpu_ms,
                max(add.maxrss_kib, dele.maxrss_kib),
                add.status or dele.status,
                add.stdout,
                add.stderr + dele.stderr,
            )
            series[f"{name}: ADD+DEL"].samples.append(both)
    result: dict[str, Any] = {key: s.summary() for key, s in series.items()}
    result["errors"] = error_samples(series)
    return result


def error_samples(series: dict[str, Series]) -> list[str]:
    errors = []
    for key, s in series.items():
        for sample in s.samples:
            if sample.status != 0 and not key.endswith("ADD+DEL"):
                out, err = sample.stdout[:200], sample.stderr[-300:]
                errors.append(f"{key}: exit {sample.status}: {out!r} {err!r}")
    return errors[:5]


def worker(params_path: str) -> int:
    """Runs inside the outer namespace: measure, write the result beside the params."""
    params = json.loads(Path(params_path).read_text(encoding="utf-8"))
    root = Path(params["root"])
    runner = Runner(Path(params["measure"]), root)
    subj = subjects(params["guard"], root, params["netns"])
    result = measure_rounds(runner, subj, params["runs"])
    Path(params["out"]).write_text(json.dumps(result), encoding="utf-8")
    return 0


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True)


def run(measure: Path, guard: Path, root: Path, runs: int) -> dict[str, Any]:
    if os.geteuid() != 0:
        return {"skipped": "needs root for ip netns"}
    tag = f"dgbench-{os.getpid()}"
    host, ctr = f"{tag}-host", f"{tag}-ctr"
    root.mkdir(mode=0o700, parents=True)
    params = {
        "root": str(root),
        "measure": str(measure),
        "guard": str(guard),
        "netns": f"/run/netns/{ctr}",
        "runs": runs,
        "out": str(root / "result.json"),
    }
    (root / "params.json").write_text(json.dumps(params), encoding="utf-8")
    try:
        ip("netns", "add", host)
        ip("netns", "add", ctr)
        ip("-n", host, "link", "set", "lo", "up")
        cmd = [
            "ip",
            "netns",
            "exec",
            host,
            sys.executable,
            "-m",
            "benchmarks.netns",
            str(root / "params.json"),
        ]
        subprocess.run(cmd, check=True, cwd=Path(__file__).resolve().parents[1])
        return dict(json.loads((root / "result.json").read_text(encoding="utf-8")))
    finally:
        for name in (ctr, host):
            subprocess.run(["ip", "netns", "del", name], check=False, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    sys.exit(worker(sys.argv[1]))
