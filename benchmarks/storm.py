"""Scenario c: a retry storm of DELs with no evidence, N at a time, guard and loopback alike."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.harness import Command, Runner, Sample, percentile
from benchmarks.subjects import (
    LOOPBACK,
    cni_env,
    container_id,
    guard_conf,
    guard_state,
    plugin_conf,
)


def storm(measure: Path, scratch: Path, commands: list[Command], parallel: int) -> dict[str, Any]:
    runners: dict[int, Runner] = {}

    def one(cmd: Command) -> Sample:
        me = threading.get_ident()
        if me not in runners:
            runners[me] = Runner(measure, scratch, f"storm-{me}")
        return runners[me].run(cmd)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        samples = list(pool.map(one, commands))
    wall = time.perf_counter() - start
    ms = sorted(s.ms for s in samples)
    return {
        "execs": len(samples),
        "parallel": parallel,
        "wall_s": round(wall, 3),
        "throughput_per_s": round(len(samples) / wall, 1),
        "errors": sum(1 for s in samples if s.status != 0 or s.stdout.strip()),
        "median_ms": round(percentile(ms, 50), 3),
        "median_cpu_ms": round(percentile(sorted(s.cpu_ms for s in samples), 50), 3),
        "cpu_ms_total": round(sum(s.cpu_ms for s in samples), 1),
        "p90_ms": round(percentile(ms, 90), 3),
        "peak_rss_mib": round(max(s.maxrss_kib for s in samples) / 1024, 2),
    }


def files_under(path: Path) -> list[str]:
    found = []
    for dirpath, _, filenames in os.walk(path):
        found += [os.path.relpath(os.path.join(dirpath, f), path) for f in filenames]
    return sorted(found)


SYSTEM_TMP = "/tmp"  # noqa: S108 - counting what the storm leaves there
# What a guard could leave in /tmp if it ignored TMPDIR: PyInstaller onefile dirs, tempfile names.
OURS = ("_MEI", "tmp", "cni", "delguard")


def tmp_entries() -> set[str]:
    return set(os.listdir(SYSTEM_TMP))


def leftovers(before: set[str], private_tmp: Path) -> dict[str, list[str]]:
    """New entries in TMPDIR (private to the storm) and likely ours among new ones in /tmp.

    Other processes on the machine create files in /tmp too: those are listed apart and do not
    count against the guard.
    """
    new = sorted(tmp_entries() - before)
    return {
        "in_private_tmpdir": sorted(os.listdir(private_tmp)),
        "in_system_tmp": [n for n in new if n.startswith(OURS)],
        "unattributed_in_system_tmp": [n for n in new if not n.startswith(OURS)],
    }


def run(measure: Path, guard: Path, root: Path, count: int, parallel: int) -> dict[str, Any]:
    scratch = root / "scratch"
    scratch.mkdir(parents=True)
    state = guard_state(root / "guard")
    conf = guard_conf("storm", {"type": "bridge"}, state)
    loop_conf = plugin_conf("storm", {"type": "loopback"})

    private_tmp = root / "tmpdir"
    private_tmp.mkdir()

    def commands(argv0: Path, stdin: bytes) -> list[Command]:
        envs = [cni_env("DEL", container_id("storm", n), "/usr/lib/cni") for n in range(count)]
        for env in envs:
            env["TMPDIR"] = str(private_tmp)
        return [Command((str(argv0),), env, stdin) for env in envs]

    before = tmp_entries()
    guard_result = storm(measure, scratch, commands(guard, conf), parallel)
    guard_result["leftovers_in_state_dir"] = files_under(Path(state["stateDir"]))
    guard_result["leftovers_in_tmp"] = leftovers(before, private_tmp)
    log = Path(state["logFile"])
    guard_result["log_lines"] = len(log.read_bytes().splitlines()) if log.exists() else 0
    loop_result = storm(measure, scratch, commands(LOOPBACK, loop_conf), parallel)
    return {"guard": guard_result, "loopback": loop_result}
