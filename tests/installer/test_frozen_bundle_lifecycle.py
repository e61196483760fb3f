"""The frozen bundle through its whole life in a bin dir, while a runtime keeps exec'ing it.

A runtime loop (its own process, as containerd is) execs the bin dir's cni-delguard with
CNI VERSION back to back while the installer's bundle code installs it, repairs a damaged copy
twice (one changed byte, one stray file), upgrades, rolls back, uninstalls and installs again.
Every exec must answer, except while the guard is uninstalled. Before the two-slot repair
(node/bundle.py) a repair removed the live dir and copied it again under the same name: execs
alongside it failed with ENOENT.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

from cni_delguard.node import bundle
from tests.support import guard

# One exec per line: start, end (CLOCK_MONOTONIC, one clock for every process), exit, stdout.
RUNTIME = """
import os, subprocess, sys, time
exe, stop = sys.argv[1], sys.argv[2]
env = {"CNI_COMMAND": "VERSION", "PATH": "/usr/bin:/bin"}
while not os.path.exists(stop):
    start = time.monotonic()
    try:
        r = subprocess.run([exe], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, check=False)
        rc, said = r.returncode, r.stdout[:200] + r.stderr[-200:]
    except OSError as exc:  # the exec itself failed (ENOENT: no link, no launcher)
        rc, said = -1000, str(exc)
    print(repr((start, time.monotonic(), rc, said)), flush=True)
    if rc:
        time.sleep(0.02)  # a failed exec takes no time: pace them as a runtime's retries are
"""
ANSWER = "supportedVersions"
UNUSED_FILE = "_internal/colorsys.pyc"  # a module the guard never imports: damage that still runs


@dataclass
class Step:
    name: str
    begin: float
    end: float


@dataclass
class Exec:
    start: float
    end: float
    rc: int
    said: str

    @property
    def ok(self) -> bool:
        return self.rc == 0 and ANSWER in self.said

    def during(self, steps: list[Step]) -> bool:
        return any(s.begin < self.end and self.start < s.end for s in steps)


def install(src: Path, bin_dir: Path) -> bundle.Plan:
    p = bundle.plan(str(src), str(bin_dir))
    if not p.up_to_date:
        bundle.apply(p)
    return p


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def live_dir(bin_dir: Path) -> Path:
    target = bundle.current_target(str(bin_dir))
    assert target, "no link"
    return bin_dir / target.split("/")[0]


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The frozen bundle, and an upgrade of it: the same with one more file (another digest)."""
    frozen = guard.frozen_or_skip().resolve().parent
    upgrade = tmp_path_factory.mktemp("dgbn-upgrade") / "cni-delguard"
    shutil.copytree(frozen, upgrade, symlinks=True)
    (upgrade / "_internal" / "dgbn-upgrade").write_text("the next version\n")
    return frozen, upgrade


def run_steps(bin_dir: Path, tmp: Path, steps: list[tuple[str, Callable[[], None]]]):
    stop = tmp / "stop"
    logs = [tmp / "runtime.log"]  # one loop: a second one only took the CPU the steps need
    argv = [sys.executable, "-I", "-c", RUNTIME, str(bin_dir / "cni-delguard"), str(stop)]
    loops = []
    for log in logs:
        with log.open("w") as out:
            loops.append(subprocess.Popen(argv, stdout=out))
    done: list[Step] = []
    try:
        time.sleep(0.3)  # execs before the first step
        for name, fn in steps:
            begin = time.monotonic()
            fn()
            done.append(Step(name, begin, time.monotonic()))
            time.sleep(0.3)  # execs between steps: every version is run, not only switched
    finally:
        stop.touch()
        for proc in loops:
            assert proc.wait(timeout=120) == 0, "a runtime loop died"
    execs = [Exec(*ast.literal_eval(line)) for log in logs for line in log.read_text().splitlines()]
    return done, execs


def spans_two_switches(e: Exec, steps: list[Step]) -> bool:
    """An exec the promise does not cover: its version is kept until the switch after the one
    that replaced it (bundle.py), so one that began before a step ended and ended after the next
    one began may have had its version pruned under it. Counted, never expected here."""
    return any(a.end > e.start and b.begin < e.end for a, b in pairwise(steps))


def test_execs_never_fail_across_install_repair_upgrade_rollback(
    tmp_path: Path, versions: tuple[Path, Path]
) -> None:
    current, upgrade = versions
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    install(current, bin_dir)
    slots: list[str] = []

    def repair(damage: Callable[[Path], None]) -> Callable[[], None]:
        def step() -> None:
            damaged = live_dir(bin_dir)
            damage(damaged)
            assert bundle.check(str(bin_dir), deep=True), "the damage went unnoticed"
            p = install(current, bin_dir)
            assert p.version_name != damaged.name, "repaired in place"
            slots.append(p.version_name)
        return step

    def uninstall() -> None:
        bundle.uninstall(str(bin_dir))

    steps = [
        ("repair one changed byte", repair(lambda d: flip_a_byte(d / UNUSED_FILE))),
        ("repair one stray file", repair(lambda d: (d / "_internal" / "stray").write_text("x"))),
        ("upgrade", lambda: install(upgrade, bin_dir) and None),
        ("rollback", lambda: install(current, bin_dir) and None),
        ("uninstall", uninstall),
        ("install again", lambda: install(current, bin_dir) and None),
    ]
    done, execs = run_steps(bin_dir, tmp_path, steps)

    by_name = {s.name: s for s in done}
    outage = [Step("uninstalled", by_name["uninstall"].begin, by_name["install again"].end)]
    failed = [e for e in execs if not e.ok]
    unexpected = [e for e in failed if not e.during(outage) and not spans_two_switches(e, done)]
    assert unexpected == [], [(e.rc, e.said) for e in unexpected[:5]]
    for step in done:
        assert [e for e in execs if e.during([step])], f"no exec ran during {step.name}"
    assert len(set(slots)) == 2, f"the two repairs used slots {slots}"
    assert bundle.check(str(bin_dir), deep=True) is None
    print(f"\n{len(execs)} execs, {len(failed)} failed, all while uninstalled "
          f"({len([e for e in execs if e.during(outage)])} ran then); steps: "
          + ", ".join(f"{s.name} {s.end - s.begin:.2f} s" for s in done))


def test_a_repair_keeps_the_damaged_copy_until_the_next_switch(
    tmp_path: Path, versions: tuple[Path, Path]
) -> None:
    """The damaged copy stays (a plugin started from it just before the switch still loads its
    files from there); the next switch removes it, as it removes any replaced version."""
    current, upgrade = versions
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    first = install(current, bin_dir).version_name
    flip_a_byte(bin_dir / first / UNUSED_FILE)
    second = install(current, bin_dir).version_name
    assert second == first + bundle.SECOND_SLOT
    assert sorted(os.listdir(bin_dir)) == sorted(["cni-delguard", first, second])
    newer = install(upgrade, bin_dir).version_name
    assert sorted(os.listdir(bin_dir)) == sorted(["cni-delguard", second, newer])
