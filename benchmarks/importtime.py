"""python -m benchmarks.importtime [--runs N] BIN: where the frozen guard's start-up goes.

BIN must be a bundle built with `-X importtime`:
    pyinstaller --workpath build/importtime --distpath build/importtime/dist \\
        packaging/cni-delguard.spec -- --importtime
Runs the skip-path DEL, a cached ADD, a forwarded DEL and a first ADD (fresh state dir) against a
shell delegate that answers at once, N times each, and prints the median inclusive import time
of the modules that cost most on each path. Single runs are too noisy on a shared machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from benchmarks.harness import Command, Runner, build_measure
from benchmarks.subjects import cni_env, guard_conf, guard_state

DELEGATE = """#!/bin/sh
cat >/dev/null
printf '{"cniVersion":"1.0.0","interfaces":[],"ips":[]}'
"""


def parse(stderr: bytes) -> dict[str, int]:
    """module -> inclusive microseconds, from `import time: self | cumulative | name` lines."""
    costs: dict[str, int] = {}
    for line in stderr.decode(errors="replace").splitlines():
        parts = line.split("|")
        if not line.startswith("import time:") or len(parts) != 3:
            continue
        cumulative, name = parts[1].strip(), parts[2].strip()
        if cumulative.isdigit():
            costs[name] = int(cumulative)
    return costs


def paths(bin_dir: Path, root: Path, run_no: int) -> dict[str, Command]:
    cached = guard_state(root / "cached")
    fresh = guard_state(root / f"fresh{run_no}")
    conf = guard_conf("imp", {"type": "instant"}, cached)
    cid = f"imp-{run_no}"
    netns = "/var/run/netns/none"
    exe = (str(bin_dir / "cni-delguard"),)
    cni_path = str(bin_dir)
    return {
        "skip-path DEL": Command(exe, cni_env("DEL", f"none-{run_no}", cni_path), conf),
        "cached ADD": Command(exe, cni_env("ADD", cid, cni_path, netns), conf),
        "forwarded DEL": Command(exe, cni_env("DEL", cid, cni_path, netns), conf),
        "first ADD": Command(
            exe,
            cni_env("ADD", cid + "f", cni_path, netns),
            guard_conf("imp", {"type": "instant"}, fresh),
        ),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.importtime", description=__doc__)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("bin", type=Path)
    args = ap.parse_args(argv)
    costs: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    with tempfile.TemporaryDirectory(prefix="dgimp-") as tmp:
        root = Path(tmp)
        bin_dir = root / "bin"
        bin_dir.mkdir()
        (bin_dir / "cni-delguard").symlink_to(args.bin.absolute())
        (bin_dir / "instant").write_text(DELEGATE, encoding="utf-8")
        (bin_dir / "instant").chmod(0o755)
        runner = Runner(build_measure(root), root)
        for run_no in range(-2, args.runs):
            for name, cmd in paths(bin_dir, root, run_no).items():
                sample = runner.run(cmd)
                if run_no >= 0:
                    for module, us in parse(sample.stderr).items():
                        costs[name][module].append(us)
                    costs[name]["(whole exec, wall)"].append(int(sample.ms * 1000))
    for name, modules in costs.items():
        print(f"\n{name}: median inclusive import time, ms")
        ranked = sorted(modules.items(), key=lambda kv: -statistics.median(kv[1]))
        for module, samples in ranked[: args.top]:
            print(f"  {statistics.median(samples) / 1000:8.2f}  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
