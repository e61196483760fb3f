"""python -m benchmarks [--runs N] [--only skip,netns,storm] [--bin PATH] [--storm N]

Builds nothing: it measures dist/cni-delguard/cni-delguard (or --bin) as it is.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import netns, report, skip, storm
from benchmarks.harness import Runner, build_measure
from benchmarks.subjects import (
    DEBIAN_PYTHON,
    FROZEN,
    LOOPBACK,
    REPO,
    build_floor,
    build_pyfloor,
    require_executable,
)

SCENARIOS = ("skip", "netns", "storm")


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    ap.add_argument("--runs", type=int, default=30, help="runs per subject (default 30)")
    ap.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    ap.add_argument("--bin", type=Path, default=FROZEN, help="the frozen guard to measure")
    ap.add_argument("--storm", type=int, default=1000, help="DELs in the storm (default 1000)")
    ap.add_argument("--parallel", type=int, default=16, help="storm concurrency (default 16)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "latest.json")
    return ap.parse_args(argv)


def measure(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    guard = require_executable(args.bin.absolute(), "build it with tools/build.sh")
    require_executable(LOOPBACK, "apt-get install containernetworking-plugins")
    require_executable(DEBIAN_PYTHON, "apt-get install python3.11")
    only = set(args.only.split(","))
    measurer = build_measure(scratch)
    results: dict[str, Any] = {"bin": str(guard), "runs": args.runs, "targets": {}}
    results["loadavg_at_start"] = [round(x, 2) for x in os.getloadavg()]
    if "skip" in only:
        runner = Runner(measurer, scratch)
        floors = build_floor(scratch), build_pyfloor(scratch, guard)
        results["skip"] = skip.run(runner, guard, *floors, scratch / "skip", args.runs)
        results["targets"]["skip"] = report.skip_targets(results["skip"])
    if "netns" in only:
        results["netns"] = netns.run(measurer, guard, scratch / "netns", args.runs)
        if "skipped" not in results["netns"]:
            results["targets"]["netns"] = report.netns_targets(results["netns"])
    if "storm" in only:
        results["storm"] = storm.run(measurer, guard, scratch / "storm", args.storm, args.parallel)
        results["targets"]["storm"] = report.storm_targets(results["storm"])
    results["machine"] = report.machine()
    return results


def main(argv: list[str]) -> int:
    args = parse(argv)
    with tempfile.TemporaryDirectory(prefix="dgbench-") as tmp:
        os.chmod(tmp, 0o700)
        results = measure(args, Path(tmp))
    report.emit(results, args.out)
    return 0
