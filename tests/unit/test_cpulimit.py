"""tests/support/cpulimit.py: the kubelet's quota, and a process started inside the limit stays
under it (an upper bound: a loaded machine may give it less, never more)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.support.cpulimit import HIERARCHIES, PERIOD_US, ROOT, CpuLimit

BUSY = "import time\nend = time.monotonic() + 2\nwhile time.monotonic() < end: pass\n"


def test_quota_is_the_kubelets() -> None:
    assert CpuLimit("n", "c", 100).quota_us == 10_000  # 100m of a 100 ms period
    assert CpuLimit("n", "c", 1500).quota_us == 150_000
    assert PERIOD_US == 100_000


@pytest.fixture
def limit() -> Iterator[CpuLimit]:
    if os.geteuid() != 0 or not all((ROOT / h / "cgroup.procs").exists() for h in HIERARCHIES):
        pytest.skip("needs root and cgroup v1's cpu and cpuacct hierarchies")
    made = CpuLimit(f"dgcpu-{os.getpid()}", "busy", 100)
    made.create()
    try:
        yield made
    finally:
        for hierarchy in HIERARCHIES:
            for d in (made.dir(hierarchy), made.dir(hierarchy).parent):
                if d.is_dir():
                    d.rmdir()


def test_a_busy_process_inside_stays_under_it(limit: CpuLimit) -> None:
    assert (limit.dir("cpu") / "cpu.cfs_quota_us").read_text().strip() == "10000"
    began = time.monotonic()
    done = subprocess.run([*limit.enter(), sys.executable, "-I", "-c", BUSY], timeout=60,
                          check=False)
    wall = time.monotonic() - began
    assert done.returncode == 0
    used = limit.usage_seconds()
    assert 0 < used <= 0.1 * wall + 0.15, (used, wall)
    assert limit.throttling().get("nr_periods", 0) > 0
