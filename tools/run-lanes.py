#!/usr/bin/env python3
"""run-lanes.py: the whole test suite as a few pytest processes side by side (tools/test.sh).

    tools/run-lanes.py [PYTEST-OPTIONS...]

The suites that mostly wait (a kubelet's garbage-collection periods, a node's reboot, a cluster's
rollouts) each run in a lane of their own while the rest of the suite runs in the `main` lane:
on the 2-core CI machine that is what keeps CI under its 90 minutes. Every lane is its own
pytest session (its own mount namespace and host-defaults check, tests/conftest.py), its nodes
private to it (each e2e node has its own dirs, namespaces and cgroups), and the matrix they all
record into is written under a lock (tests/support/matrix.py). When every lane has ended, the
tests that read what the lanes wrote (the matrix's page check) run in a last session.

Lanes are data (LANES below): a name and the test paths it runs; `main` runs everything no
other lane claims. Each lane's output goes to .cache/lanes/<name>.log and is printed whole when
the lane ends; the exit status is 0 only when every lane and the last session passed (pytest's 5,
"no tests collected", is a failure like any other). Options are given to every lane. A
selection of tests (a path or node id) runs as one plain pytest, no lanes: tools/test.sh
tests/unit -q.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO / ".cache" / "lanes"
# The tests that read what every lane wrote: run after all of them (tests/conftest.py RUN_LAST).
LAST = ("tests/test_readme_matrix.py",)


@dataclass(frozen=True)
class Lane:
    name: str
    paths: tuple[str, ...]  # () for main: everything no other lane runs


# Each waiting suite's wall time alone is in its README; main holds the CPU-bound rest.
# The CRI suite waits on runtimes' and clients' deadlines (load under 1 for most of it); its
# reported-stack runs (about 60 nodes that wait on daemons' and GC periods, 20 minutes) are a
# lane of their own beside the rest of it, which the `cri` lane then leaves out. The Go
# bootstrap test builds multus in a clean root (CPU, network) while it waits.
LANES = (
    Lane("kubelet", ("tests/e2e_kubelet",)),
    Lane("cluster", ("tests/e2e_cluster",)),
    Lane("reported", ("tests/e2e_cri/test_reported.py",)),
    Lane("cri", ("tests/e2e_cri",)),
    Lane("bootstrap", ("tests/test_install_go.py",)),
    Lane("main", ()),
)


def _inside(path: str, parent: str) -> bool:
    return path != parent and Path(path).is_relative_to(parent)


def commands(python: str, options: list[str]) -> dict[str, list[str]]:
    """The pytest command line of each lane: its paths, less those another lane claims."""
    claimed = [p for lane in LANES for p in lane.paths]
    out = {}
    for lane in LANES:
        if lane.paths:
            selection = [p for p in lane.paths if (REPO / p).exists()]
            selection += [f"--ignore={c}" for c in claimed
                          if any(_inside(c, p) for p in selection)]
        else:
            selection = ["tests", *(f"--ignore={p}" for p in (*claimed, *LAST))]
        if any(not a.startswith("-") for a in selection):
            out[lane.name] = [python, "-m", "pytest", *options, *selection]
    return out


def is_selection(arg: str) -> bool:
    return not arg.startswith("-") and (REPO / arg.split("::", 1)[0]).exists()


def main(argv: list[str]) -> int:
    python = os.environ.get("PYTHON", sys.executable)
    if any(is_selection(a) for a in argv):
        return subprocess.call([python, "-m", "pytest", *argv], cwd=REPO)
    LOGS.mkdir(parents=True, exist_ok=True)
    running: dict[str, tuple[subprocess.Popen[bytes], float, Path]] = {}
    for name, cmd in commands(python, argv).items():
        log = LOGS / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        running[name] = (proc, time.monotonic(), log)
        sys.stdout.write(f"run-lanes: {name} started: {' '.join(cmd[1:])}\n")
        sys.stdout.flush()
    failed = []
    while running:
        time.sleep(2)
        for name, (proc, start, log) in list(running.items()):
            if proc.poll() is None:
                continue
            del running[name]
            took = time.monotonic() - start
            sys.stdout.write(f"\n===== lane {name}: exit {proc.returncode} in {took:.0f} s "
                             f"({log.relative_to(REPO)}) =====\n")
            sys.stdout.write(log.read_text(errors="replace"))
            sys.stdout.flush()
            if proc.returncode != 0:
                failed.append(name)
    last = subprocess.call([python, "-m", "pytest", *argv, *LAST], cwd=REPO)
    if last != 0:
        failed.append("last")
    summary = f"failed: {', '.join(failed)}" if failed else "every lane passed"
    sys.stdout.write(f"run-lanes: {summary}\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
