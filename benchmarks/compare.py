"""python -m benchmarks.compare [--runs N] NAME=PATH...: the skip-path DEL of several builds.

Interleaved like the main benchmark, with loopback and Debian's bare python3.11 alongside as
yardsticks; prints a table (CPU also as a multiple of Debian's bare interpreter start) and builds
nothing (packaging/variants.sh builds the variants it is meant for).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks.harness import Command, Runner, build_measure, interleave
from benchmarks.skip import BARE
from benchmarks.subjects import (
    DEBIAN_PYTHON,
    LOOPBACK,
    cni_env,
    container_id,
    guard_conf,
    guard_state,
    plugin_conf,
)

PYTHON = "Debian python3.11 -I -S -c pass"


def subject(exe: str, conf: bytes) -> Callable[[int], Command]:
    return lambda n: Command((exe,), cni_env("DEL", container_id("cmp", n), "/usr/lib/cni"), conf)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("builds", nargs="+", metavar="NAME=PATH")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dgcmp-") as tmp:
        root = Path(tmp)
        conf = guard_conf("cmp", {"type": "bridge"}, guard_state(root / "guard"))
        subjects = {
            "loopback DEL": subject(str(LOOPBACK), plugin_conf("cmp", {"type": "loopback"})),
            PYTHON: lambda n: Command((str(DEBIAN_PYTHON), *BARE), {}),
        }
        for build in args.builds:
            name, path = build.split("=", 1)
            subjects[name] = subject(str(Path(path).absolute()), conf)
        series = interleave(Runner(build_measure(root), root), subjects, args.runs)
    python_cpu = series[PYTHON].summary()["median_cpu_ms"]
    print(f"{'build':34s} {'median ms':>9s} {'p90 ms':>8s} {'CPU ms':>7s} {'x python':>8s} "
          f"{'RSS MiB':>8s} fails")
    for name, s in series.items():
        m = s.summary()
        print(
            f"{name:34s} {m['median_ms']:9.2f} {m['p90_ms']:8.2f} {m['median_cpu_ms']:7.2f} "
            f"{m['median_cpu_ms'] / python_cpu:8.2f} {m['peak_rss_mib']:8.1f} {m['failures']:5d}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
