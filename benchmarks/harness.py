"""Run a command once and measure it through benchmarks/measure.c (fork + exec + wait4).

The harness posix_spawns the static `measure` program, which forks the subject, times fork to
reaped exit with CLOCK_MONOTONIC and reports the subject's ru_maxrss from wait4 (why not directly
from Python: see measure.c). stdin comes from a file, stdout and stderr go to files, so nothing
is buffered in the harness while the subject runs.
"""

from __future__ import annotations

import os
import statistics
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Command:
    """One exec: argv[0] is the path that is run, env is the whole environment."""

    argv: tuple[str, ...]
    env: dict[str, str]
    stdin: bytes = b""


@dataclass(frozen=True)
class Sample:
    ms: float
    cpu_ms: float
    maxrss_kib: int
    status: int
    stdout: bytes
    stderr: bytes


@dataclass
class Series:
    """The samples of one subject in one scenario."""

    name: str
    samples: list[Sample] = field(default_factory=list)

    def ms(self) -> list[float]:
        return [s.ms for s in self.samples]

    def summary(self) -> dict[str, float | int]:
        ms = sorted(self.ms())
        return {
            "runs": len(ms),
            "median_ms": round(statistics.median(ms), 3),
            "p90_ms": round(percentile(ms, 90), 3),
            "min_ms": round(ms[0], 3),
            "median_cpu_ms": round(statistics.median(s.cpu_ms for s in self.samples), 3),
            "peak_rss_mib": round(max(s.maxrss_kib for s in self.samples) / 1024, 2),
            "median_rss_mib": round(
                statistics.median(s.maxrss_kib for s in self.samples) / 1024, 2
            ),
            "failures": sum(1 for s in self.samples if s.status != 0),
        }


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    rank = max(1, -(-len(sorted_values) * pct // 100))
    return sorted_values[int(rank) - 1]


MEASURE_SOURCE = Path(__file__).with_name("measure.c")
WRITE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC


def build_measure(scratch: Path) -> Path:
    exe = scratch / "measure"
    subprocess.run(["gcc", "-static", "-O2", "-o", str(exe), str(MEASURE_SOURCE)], check=True)
    return exe


class Runner:
    """Runs commands through `measure`, with its files in a scratch dir of its own."""

    def __init__(self, measure: Path, scratch: Path, tag: str = "main") -> None:
        self._measure = str(measure)
        self._in = scratch / f"{tag}.stdin"
        self._out = scratch / f"{tag}.stdout"
        self._err = scratch / f"{tag}.stderr"
        self._res = scratch / f"{tag}.result"

    def run(self, cmd: Command) -> Sample:
        self._in.write_bytes(cmd.stdin)
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, str(self._in), os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, str(self._out), WRITE, 0o600),
            (os.POSIX_SPAWN_OPEN, 2, str(self._err), WRITE, 0o600),
            (os.POSIX_SPAWN_OPEN, 3, str(self._res), WRITE, 0o600),
        ]
        argv = [self._measure, *cmd.argv]
        pid = os.posix_spawn(self._measure, argv, cmd.env, file_actions=actions)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"measure failed on {cmd.argv[0]}")
        ns, maxrss, code, cpu_us = self._res.read_text(encoding="ascii").split()
        return Sample(
            ms=int(ns) / 1e6,
            cpu_ms=int(cpu_us) / 1e3,
            maxrss_kib=int(maxrss),
            status=int(code),
            stdout=self._out.read_bytes(),
            stderr=self._err.read_bytes(),
        )


def interleave(
    runner: Runner,
    subjects: dict[str, Callable[[int], Command]],
    runs: int,
    warmup: int = 3,
) -> dict[str, Series]:
    """Run every subject `runs` times, one of each per round, rotating the order every round.

    A subject is a function of the round number (so each round can use a fresh container ID).
    Warm-up rounds (negative round numbers) are run and discarded.
    """
    series = {name: Series(name) for name in subjects}
    names = list(subjects)
    for round_no in range(-warmup, runs):
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            sample = runner.run(subjects[name](round_no))
            if round_no >= 0:
                series[name].samples.append(sample)
    return series
