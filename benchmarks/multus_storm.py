"""The DEL storm at real multus v4.3.0, without and with the guard in front.

    python -m benchmarks.multus_storm [--dels 200] [--parallel 4] [--forms thick,thin-inline]

As root, with multus built (tools/install-peers.sh multus), cnitool's build and the frozen guard
(tools/build.sh). For each multus form of tests/support/multusnode.FORMS: one node (its own mount
namespace, the fake API server, the kube-ovn fake), --parallel stale sandboxes (pods in the API,
ADD never run: what a kubelet keeps retrying after a disruption), and --dels DELs spread over
them, --parallel at a time, each exec'd the way libcni execs the conflist's plugin (multus-shim
or multus, or the guard wrapping it). The two subjects run interleaved in rounds of --parallel
DELs each, so load from other work falls on both alike. Per subject it prints:

- what reached multus: `multus_dels` (thick: the daemon's own count of CNI requests, its log's
  'DEL starting CNI request' lines; thin: the multus processes' 'CmdDel' lines), kube-ovn's DEL
  execs, the API server's pod GETs;
- the time per DEL as the runtime sees it (median, p90, mean; fork to exit, nsenter included);
- thick: the daemon's CPU time spent on the storm, per DEL: its own (utime + stime from /proc)
  and its delegates' (cutime + cstime: the kube-ovn execs it ran and reaped).

A third subject, `kube_ovn_alone`, execs the kube-ovn fake with its own conflist and no multus:
the fake is a Python process (a real kube-ovn is a Go binary and an RPC), so this is the share of
`without_guard`'s time that is the fake's rather than multus's.

No target: the figures are compared with each other, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.support.multus import MultusThick
from tests.support.multusnode import FORMS, MultusNode, Sandbox

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(its own utime + stime, its reaped children's cutime + cstime) in seconds."""
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return own, (int(fields[13]) + int(fields[14])) / CLK_TCK


def daemon_cpu(bench: MultusNode) -> tuple[float, float]:
    chain = bench.chain
    if isinstance(chain, MultusThick) and chain.daemon is not None:
        return cpu_seconds(chain.daemon.pid)
    return 0.0, 0.0


class Subject:
    def __init__(self, name: str, network: str) -> None:
        self.name, self.network = name, network
        self.ms: list[float] = []
        self.failures = 0
        self.multus_dels = self.kube_ovn_dels = self.api_gets = 0
        self.daemon_cpu_s = self.children_cpu_s = 0.0

    def round(self, bench: MultusNode, boxes: list[Sandbox], pool: ThreadPoolExecutor) -> None:
        api, kube_ovn = bench.chain.api, bench.chain.kube_ovn
        if api is None or kube_ovn is None:
            raise RuntimeError("the chain is not started")
        dels0, kube0 = bench.multus_dels(), len(kube_ovn.calls("DEL"))
        gets0, cpu0 = api.count("GET", "pods"), daemon_cpu(bench)

        def one(box: Sandbox) -> tuple[float, int]:
            start = time.perf_counter()
            out = bench.exec_plugin("DEL", self.network, box)
            return (time.perf_counter() - start) * 1000, out.rc

        for ms, rc in pool.map(one, boxes):
            self.ms.append(ms)
            self.failures += rc != 0
        self.multus_dels += bench.multus_dels() - dels0
        self.kube_ovn_dels += len(kube_ovn.calls("DEL")) - kube0
        self.api_gets += api.count("GET", "pods") - gets0
        own, children = daemon_cpu(bench)
        self.daemon_cpu_s += own - cpu0[0]
        self.children_cpu_s += children - cpu0[1]

    def report(self, thick: bool) -> dict[str, Any]:
        ms = sorted(self.ms)
        out: dict[str, Any] = {
            "dels": len(ms), "failures": self.failures, "multus_dels": self.multus_dels,
            "kube_ovn_dels": self.kube_ovn_dels, "api_pod_gets": self.api_gets,
            "median_ms": round(statistics.median(ms), 2),
            "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 2),
            "mean_ms": round(statistics.fmean(ms), 2),
        }
        if thick:
            out["daemon_cpu_ms_per_del"] = round(1000 * self.daemon_cpu_s / len(ms), 3)
            out["daemon_children_cpu_ms_per_del"] = round(1000 * self.children_cpu_s / len(ms), 3)
        return out


def run_form(form: str, dels: int, parallel: int) -> dict[str, Any]:
    bench = MultusNode.create(form)
    try:
        subjects = [Subject("without_guard", bench.network(guard=False)),
                    Subject("with_guard", bench.network(guard=True)),
                    Subject("kube_ovn_alone", bench.kube_ovn_network())]
        boxes = [bench.sandbox() for _ in range(parallel)]
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            for _ in range(max(1, dels // parallel)):
                for subject in subjects:
                    subject.round(bench, boxes, pool)
        thick = isinstance(bench.chain, MultusThick)
        return {s.name: s.report(thick) for s in subjects}
    finally:
        bench.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dels", type=int, default=200, help="DELs per subject and form")
    parser.add_argument("--parallel", type=int, default=4, help="stale sandboxes DEL'd at once")
    parser.add_argument("--forms", default="thick,thin-inline",
                        help=f"comma-separated, of {', '.join(FORMS)}")
    args = parser.parse_args(argv)
    forms = [f for f in args.forms.split(",") if f]
    unknown = [f for f in forms if f not in FORMS]
    if unknown:
        parser.error(f"unknown forms {unknown}")
    result = {"dels": args.dels, "parallel": args.parallel, "load": os.getloadavg()[0],
              "forms": {form: run_form(form, args.dels, args.parallel) for form in forms}}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
