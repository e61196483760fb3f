"""The watcher's cost with its metrics endpoint scraped every 15 s, beside a watcher without it.

    python -m benchmarks.watch_metrics [--seconds 300] [--scrape-every 15] [--bin PATH]

Runs the frozen binary (dist/cni-delguard/cni-delguard, tools/build.sh) twice at once on two temp
node roots of the same shape (a multus conf, 110 markers: a full node's pods, and a 10 MiB
decision log, the size the guard rotates at, both growing by one DEL record a second):
- `metrics`: `install --watch --metrics-address 127.0.0.1:0` (every default: --metrics-interval
  15 s), scraped every --scrape-every seconds with the Accept header Prometheus sends;
- `reference`: `install --watch`, the same without metrics.
Over the same --seconds: CPU time of each, its waited children included (the ready check execs
the plugin's VERSION; utime + stime + cutime + cstime from /proc/<pid>/stat), VmRSS and VmHWM;
the start-up (first scrape served, the log's history read) is before the window and reported on
its own. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from benchmarks.installer_watch import CONF, cpu_seconds, memory_kib, wait, wrapped
from benchmarks.subjects import FROZEN

ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
          "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
MARKERS = 110
LOG_BYTES = 10 * 1024 * 1024


def record(n: int) -> bytes:
    return json.dumps({"ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "level": "info",
                       "command": "DEL", "containerID": f"{n:064x}", "ifname": "eth0",
                       "network": "multus-cni-network", "evidence": [], "decision": "skip",
                       "reason": "no evidence of an ADD", "durationMs": 1.2}).encode() + b"\n"


def plant(root: Path) -> Path:
    """A node root shaped like a busy node's; returns its decision log."""
    for d in ("opt/cni/bin", "etc/cni/net.d"):
        (root / d).mkdir(parents=True)
    (root / "etc/cni/net.d/00-multus.conf").write_text(CONF.replace("NET", "net0"))
    nets = root / "var/lib/cni/delguard/networks/multus-cni-network"
    nets.mkdir(parents=True, mode=0o700)
    for p in (nets.parent.parent, nets.parent):
        p.chmod(0o700)
    for i in range(MARKERS):
        body = {"state": "completed", "containerID": f"{i:064x}", "ifname": "eth0",
                "time": time.time() - i}
        (nets / f"{i:064x}:eth0.json").write_text(json.dumps(body))
    log = root / "var/log/cni-delguard/delguard.log"
    log.parent.mkdir(parents=True)
    with log.open("wb") as f:
        n = 0
        while f.tell() < LOG_BYTES:
            f.write(record(n))
            n += 1
    return log


def cpu(procs: dict[str, subprocess.Popen[bytes]]) -> dict[str, float]:
    return {name: cpu_seconds(p.pid, children=True) for name, p in procs.items()}


class Scraper(threading.Thread):
    def __init__(self, port: int, every: float, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.url, self.every, self.stop = f"http://127.0.0.1:{port}/metrics", every, stop
        self.latency: list[float] = []
        self.size = 0

    def run(self) -> None:
        while not self.stop.is_set():
            start = time.monotonic()
            req = urllib.request.Request(self.url, headers={"Accept": ACCEPT})  # noqa: S310
            with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310 - loopback
                self.size = len(r.read())
            self.latency.append(time.monotonic() - start)
            self.stop.wait(self.every)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--scrape-every", type=float, default=15.0)
    parser.add_argument("--bin", default=str(FROZEN))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        roots = {name: Path(tmp) / name for name in ("metrics", "reference")}
        logs = {name: plant(root) for name, root in roots.items()}
        extra = {"metrics": ["--metrics-address", "127.0.0.1:0"], "reference": []}
        procs, outs = {}, {}
        for name, root in roots.items():
            outs[name] = Path(tmp) / f"{name}.out"
            with outs[name].open("w") as out:
                procs[name] = subprocess.Popen(
                    [args.bin, "install", "--watch", "--root", str(root), *extra[name]],
                    stdout=out, stderr=subprocess.STDOUT)
        stop = threading.Event()
        try:
            started = time.monotonic()
            wait(lambda: "metrics: serving" in outs["metrics"].read_text(), "metrics: serving")
            serving_after = time.monotonic() - started
            # Start-up, the 10 MiB history read included (the first refresh comes before the bind).
            startup_cpu = cpu(procs)
            for root in roots.values():
                wait(lambda r=root: wrapped(r / "etc/cni/net.d/00-multus.conf"))
            port = int(re.search(r"127\.0\.0\.1:(\d+)/metrics", outs["metrics"].read_text())[1])
            time.sleep(20)  # past the first wraps and the bundle's first full check
            scraper = Scraper(port, args.scrape_every, stop)
            scraper.start()
            cpu0 = cpu(procs)
            t0, n = time.monotonic(), 0
            while time.monotonic() - t0 < args.seconds:  # one DEL record a second, each log
                for log in logs.values():
                    with log.open("ab") as f:
                        f.write(record(n))
                n += 1
                time.sleep(1.0)
            window = time.monotonic() - t0
            share = {name: (spent - cpu0[name]) / window for name, spent in cpu(procs).items()}
            memory = {name: memory_kib(p.pid) for name, p in procs.items()}
        finally:
            stop.set()
            for p in procs.values():
                p.terminate()
                p.wait(timeout=30)
    result = {
        "seconds": round(window, 1),
        "scrape_every_s": args.scrape_every,
        "scrapes": len(scraper.latency),
        "scrape_ms": {"median": round(statistics.median(scraper.latency) * 1000, 2),
                      "max": round(max(scraper.latency) * 1000, 2)},
        "exposition_bytes": scraper.size,
        "first_scrape_served_after_s": round(serving_after, 2),
        "startup_cpu_s": {k: round(v, 2) for k, v in startup_cpu.items()},
        "watchers": {
            name: {"cpu_percent": round(share[name] * 100, 3),
                   "rss_mib": round(memory[name]["VmRSS"] / 1024, 1),
                   "peak_rss_mib": round(memory[name]["VmHWM"] / 1024, 1)}
            for name in procs
        },
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
