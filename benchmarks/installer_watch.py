"""The long-running installer: re-wrap delay after a multus rewrite, CPU and memory while idle.

    python -m benchmarks.installer_watch [--idle SECONDS] [--rewrites N] [--bin PATH]

Runs the frozen binary (dist/cni-delguard/cni-delguard, tools/build.sh) as `install --watch`
with its default poll interval (the storm damper lifted) on a temp node root, then
- idle: CPU time (utime + stime from /proc/<pid>/stat) over --idle seconds (60), and VmRSS /
  VmHWM from /proc/<pid>/status;
- re-wrap delay: N times, multus's way of writing its conf (a rename of a regenerated file),
  then the time until the conf names the guard again (polled every 5 ms), 3 s apart.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.subjects import FROZEN

CONF = """{"cniVersion":"0.3.1","name":"multus-cni-network","type":"multus",
"kubeconfig":"/etc/cni/net.d/multus.d/multus.kubeconfig",
"delegates":[{"cniVersion":"0.3.1","name":"NET","type":"bridge"}]}
"""


def cpu_seconds(pid: int, children: bool = False) -> float:
    """utime + stime of `pid`, and with `children` those of the children it has waited for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11 : 15 if children else 13]) / os.sysconf("SC_CLK_TCK")


def memory_kib(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def wrapped(path: Path) -> bool:
    try:
        return json.loads(path.read_text()).get("type") == "cni-delguard"
    except (OSError, ValueError):
        return False


def wait(
    predicate, what: str = "the conf wrapped again", timeout: float = 60.0, every: float = 0.005
) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(every)
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, default=60.0)
    parser.add_argument("--rewrites", type=int, default=10)
    parser.add_argument("--bin", default=str(FROZEN))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for d in ("opt/cni/bin", "etc/cni/net.d"):
            (root / d).mkdir(parents=True)
        conf = root / "etc/cni/net.d/00-multus.conf"
        conf.write_text(CONF.replace("NET", "net0"))
        log = open(root / "watch.log", "w")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            # The storm damper (10 re-wraps a minute) would hold back this fast series.
            [args.bin, "install", "--watch", "--root", str(root), "--max-repatches", "100"],
            stdout=log,
            stderr=log,
        )
        try:
            wait(lambda: wrapped(conf))
            time.sleep(3)  # the first install's copy and hash are not idling
            cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
            time.sleep(args.idle)
            idle_cpu = (cpu_seconds(proc.pid) - cpu0) / (time.monotonic() - t0)
            memory = memory_kib(proc.pid)
            delays = []
            for i in range(args.rewrites):
                tmp_conf = conf.with_name(".multus.tmp")
                tmp_conf.write_text(CONF.replace("NET", f"net{i + 1}"))
                os.rename(tmp_conf, conf)
                delays.append(wait(lambda: wrapped(conf)))
                time.sleep(3)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            log.close()
    result = {
        "idle_seconds": args.idle,
        "idle_cpu_percent": round(idle_cpu * 100, 3),
        "rss_kib": memory.get("VmRSS"),
        "peak_rss_kib": memory.get("VmHWM"),
        "rewrites": len(delays),
        "rewrap_delay_s": {
            "min": round(min(delays), 3),
            "median": round(statistics.median(delays), 3),
            "max": round(max(delays), 3),
        },
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
