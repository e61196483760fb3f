"""A container's CPU limit as the kubelet sets it, on cgroup v1's cpu controller (this machine has
no cgroup v2 and no systemd): a cgroup of its own in the cpu and cpuacct hierarchies, a CFS quota
of `millicores` per period, and the process started in it, so everything it execs (a DaemonSet's
delegates) shares the limit, as in the container.

The kubelet's conversion: quota = millicores * period / 1000, the period 100 ms (kubelet
pkg/kubelet/cm/helpers_linux.go MilliCPUToQuota, QuotaPeriod): limits.cpu 100m is 10 ms of CPU in
every 100 ms. The cgroups live under the node's own (`/<node name>/...`), so the node's power-off
kills what runs in them and its teardown removes them (tests/e2e_cri/node.py).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000  # the kubelet's CFS period
HIERARCHIES = ("cpu", "cpuacct")  # mounted apart on this machine (cgroup v1)

# Run in front of a command: join the cgroups named before "--" (their cgroup.procs files), then
# exec the command in place, so it starts inside them with the same pid.
JOIN = r"""
import os, sys
cut = sys.argv.index("--")
for procs in sys.argv[1:cut]:
    with open(procs, "w") as f:
        f.write(str(os.getpid()))
os.execvp(sys.argv[cut + 1], sys.argv[cut + 1:])
"""


@dataclass(frozen=True)
class CpuLimit:
    parent: str  # the node's cgroup name
    name: str
    millicores: int

    def dir(self, hierarchy: str) -> Path:
        return ROOT / hierarchy / self.parent / self.name

    @property
    def quota_us(self) -> int:
        return self.millicores * PERIOD_US // 1000

    def create(self) -> None:
        """The cgroups, the quota set (again after a power-off removed them)."""
        for hierarchy in HIERARCHIES:
            self.dir(hierarchy).mkdir(parents=True, exist_ok=True)
        cpu = self.dir("cpu")
        (cpu / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (cpu / "cpu.cfs_quota_us").write_text(str(self.quota_us))

    def enter(self) -> tuple[str, ...]:
        """The argv prefix that starts a command inside the limit."""
        procs = [str(self.dir(h) / "cgroup.procs") for h in HIERARCHIES]
        return (sys.executable, "-I", "-c", JOIN, *procs, "--")

    def usage_seconds(self) -> float:
        """CPU time used in the cgroup since it was made (cpuacct.usage, in ns)."""
        try:
            return int((self.dir("cpuacct") / "cpuacct.usage").read_text()) / 1e9
        except (FileNotFoundError, ValueError):
            return 0.0

    def throttling(self) -> dict[str, int]:
        """cpu.stat: periods run, periods throttled, time throttled (ns)."""
        try:
            text = (self.dir("cpu") / "cpu.stat").read_text()
        except FileNotFoundError:
            return {}
        return {k: int(v) for k, v in (line.split() for line in text.splitlines())}
