"""Scenario a: DEL with no evidence (the guard's skip path) against loopback's DEL, the static
floor, and the interpreter's floors: Debian's python3.11 started bare (`-I -S -c pass`), the one
the skip path is held against, and the bundle's own interpreter started bare (pyfloor.c)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness import Command, Runner, Series, interleave
from benchmarks.subjects import (
    DEBIAN_PYTHON,
    LOOPBACK,
    container_id,
    guard_conf,
    guard_state,
    plugin_conf,
)
from benchmarks.subjects import cni_env as env_for

BARE = ("-I", "-S", "-c", "pass")


def subjects(
    guard: Path, floor: Path, pyfloor: tuple[str, ...], root: Path
) -> dict[str, Callable[[int], Command]]:
    conf = guard_conf("bench", {"type": "bridge"}, guard_state(root))
    loop_conf = plugin_conf("bench", {"type": "loopback"})
    cni_path = f"{root / 'bin'}:/usr/lib/cni"

    def guard_del(n: int) -> Command:
        return Command((str(guard),), env_for("DEL", container_id("skip", n), cni_path), conf)

    def loopback_del(n: int) -> Command:
        return Command(
            (str(LOOPBACK),), env_for("DEL", container_id("skip", n), cni_path), loop_conf
        )

    def floor_run(n: int) -> Command:
        return Command((str(floor),), env_for("DEL", container_id("skip", n), cni_path), conf)

    def debian_python(n: int) -> Command:
        return Command((str(DEBIAN_PYTHON), *BARE), env_for("DEL", container_id("skip", n), ""))

    def bundle_python(n: int) -> Command:
        return Command(pyfloor, env_for("DEL", container_id("skip", n), ""))

    return {
        "guard skip-path DEL": guard_del,
        "Debian python3.11 -I -S -c pass": debian_python,
        "the bundle's interpreter, bare": bundle_python,
        "loopback DEL": loopback_del,
        "static floor": floor_run,
    }


def run(
    runner: Runner, guard: Path, floor: Path, pyfloor: tuple[str, ...], root: Path, runs: int
) -> dict[str, Any]:
    series = interleave(runner, subjects(guard, floor, pyfloor, root), runs)
    guard_series = series["guard skip-path DEL"]
    result: dict[str, Any] = {name: s.summary() for name, s in series.items()}
    result["guard stdout not empty"] = sum(1 for s in guard_series.samples if s.stdout.strip())
    result["first guard stderr"] = first_stderr(guard_series)
    return result


def first_stderr(series: Series) -> str:
    for sample in series.samples:
        if sample.stderr:
            return sample.stderr.decode(errors="replace")[-500:]
    return ""
