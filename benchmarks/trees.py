"""python -m benchmarks.trees [--runs N] NAME=SOURCE_TREE...: first ADD, ADD with a stored
verdict, and the skip-path DEL of several source trees of the package, in one interleaved run.

For a change to the config's validation or the state dir's layout, measured against the tree it
replaces (a `git worktree` of the base commit) in the same run, so the machine's load is shared.
Each tree runs as the package (`python3 -I`, the tree first on sys.path), not frozen: the
comparison is between trees, the interpreter start the same for all. The delegate is a static C
program that prints a minimal result (its cost is in every ADD alike).

- first ADD: a state dir of its own every round, so no verdict is stored (pydantic validates);
- ADD, verdict stored: one state dir for the tree, a new container every round;
- skip DEL: no evidence for the attachment, the delegate never run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks.harness import Command, Runner, build_measure, interleave
from benchmarks.subjects import cni_env, container_id, guard_conf

# The delegate never enters it; the guard only requires the variable for ADD.
NETNS = "/proc/self/ns/net"
DELEGATE_SOURCE = """\
#include <stdio.h>
#include <unistd.h>
int main(void) {
    char buf[4096];
    while (read(0, buf, sizeof buf) > 0) {
    }
    fputs("{\\"cniVersion\\": \\"1.0.0\\"}\\n", stdout);
    return 0;
}
"""


def build_delegate(scratch: Path) -> Path:
    bin_dir = scratch / "bin"
    bin_dir.mkdir()
    src = scratch / "delegate.c"
    src.write_text(DELEGATE_SOURCE, encoding="utf-8")
    subprocess.run(["gcc", "-static", "-O2", "-o", str(bin_dir / "result"), str(src)], check=True)
    return bin_dir


def argv(tree: Path) -> tuple[str, ...]:
    code = f"import sys; sys.path.insert(0, {str(tree)!r}); from cni_delguard.cli import run; run()"
    return (sys.executable, "-I", "-c", code)


def state(root: Path) -> dict[str, object]:
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    (root / "results").mkdir(mode=0o700, exist_ok=True)
    return {"stateDir": str(root / "state"), "logFile": str(root / "log" / "delguard.log"),
            "resultCacheDirs": [str(root / "results")], "multusCacheDirs": [str(root / "results")]}


def subjects(name: str, tree: Path, scratch: Path, bin_dir: Path
             ) -> dict[str, Callable[[int], Command]]:
    exe = argv(tree)
    shared = state(scratch / name / "shared")
    delegate = {"type": "result"}

    def first_add(n: int) -> Command:
        conf = guard_conf("bench", delegate, state(scratch / name / f"first-{n + 10}"))
        return Command(exe, cni_env("ADD", container_id("first", n), str(bin_dir), NETNS), conf)

    def stored_add(n: int) -> Command:
        conf = guard_conf("bench", delegate, shared)
        return Command(exe, cni_env("ADD", container_id("again", n), str(bin_dir), NETNS), conf)

    def skip_del(n: int) -> Command:
        conf = guard_conf("bench", delegate, shared)
        return Command(exe, cni_env("DEL", container_id("stale", n), str(bin_dir)), conf)

    return {f"{name}: first ADD": first_add, f"{name}: ADD, verdict stored": stored_add,
            f"{name}: skip DEL": skip_del}


def main(argv_: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.trees", description=__doc__)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", type=Path, help="also write the summaries here")
    ap.add_argument("trees", nargs="+", metavar="NAME=SOURCE_TREE")
    args = ap.parse_args(argv_)
    scratch = Path(tempfile.mkdtemp(prefix="dgtrees-"))
    try:
        bin_dir = build_delegate(scratch)
        table: dict[str, Callable[[int], Command]] = {}
        for spec in args.trees:
            name, tree = spec.split("=", 1)
            table |= subjects(name, Path(tree).resolve(), scratch, bin_dir)
        series = interleave(Runner(build_measure(scratch), scratch), table, args.runs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    out = {name: s.summary() for name, s in series.items()}
    width = max(len(n) for n in out)
    sys.stdout.write(f"{'subject':<{width}}  median ms  p90 ms  CPU ms  failures\n")
    for name, s in out.items():
        sys.stdout.write(f"{name:<{width}}  {s['median_ms']:9.1f}  {s['p90_ms']:6.1f}  "
                         f"{s['median_cpu_ms']:6.1f}  {s['failures']}\n")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0 if all(s["failures"] == 0 for s in out.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
