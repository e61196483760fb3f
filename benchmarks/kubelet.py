"""What the guard costs a pod, as a real kubelet starts them: 20 static pods at once, from the
manifests to every sandbox Ready, without and with the guard, interleaved, in the same run.

    python -m benchmarks.kubelet [--pods 20] [--rounds 5] [--runtime containerd-2.1]

One node of the kubelet suite (tests/e2e_kubelet: its own containerd and a standalone kubelet,
peers/pins.tsv's, in namespaces of their own) with Debian's bridge + host-local as the chain:
one round writes --pods manifests at once and polls the runtime over CRI until every sandbox
is READY; the pods are then deleted and the next round waits until the kubelet's GC has removed
every sandbox, so no round pays for another's. Rounds alternate without / with the guard (which
wraps bridge, the frozen build tools/build.sh made), the order flipped every pair so that a
drift in the machine's load falls on both. Prints one JSON object: each round's seconds, the
medians and the ratio with / without (the target: at most 1.05), and each pair's own
ratio (the two rounds ran back to back: their spread is the machine's load). Needs root.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.e2e_cri import cri, pause_image
from tests.e2e_cri.scenario import bridge_conf
from tests.e2e_kubelet.installer_pod import ImageArchive
from tests.e2e_kubelet.kubelet import GC_PERIOD, NAMESPACE, missing, plain_pod
from tests.e2e_kubelet.runtimes import RUNTIMES
from tests.e2e_kubelet.site import Shared, Site, site
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("DELGUARD_E2E_CACHE", str(REPO / ".cache" / "e2e")))
TARGET = 1.05
ROUND_BOUND = 600  # seconds for one round's pods to be Ready, or removed again


def names(tag: str, pods: int) -> list[str]:
    return [f"{tag}-{i:02d}" for i in range(pods)]


def ours(here: Site, tag: str) -> list[object]:
    prefix = f"{tag}-"
    return [s for s in here.cri.list_pods()
            if s.metadata.namespace == NAMESPACE and s.metadata.name.startswith(prefix)]


def one_round(here: Site, guarded: bool, tag: str, pods: int) -> float:
    """Seconds from writing the manifests to every sandbox READY; then cleaned up again."""
    here.net.guarded = guarded
    here.net.apply(here.cri, [bridge_conf(here.node)])
    started = time.monotonic()
    for name in names(tag, pods):
        here.kubelet.put(name, plain_pod(name, pause_image.IMAGE_REF))

    def all_ready() -> bool:
        found = ours(here, tag)
        return len(found) == pods and all(here.state(s) == "SANDBOX_READY" for s in found)

    wait_for(all_ready, f"{pods} sandboxes READY", timeout=ROUND_BOUND, every=0.1,
             detail=here.kubelet.log_tail)
    seconds = time.monotonic() - started
    for name in names(tag, pods):
        here.kubelet.delete(name)
    wait_for(lambda: not ours(here, tag), "the kubelet's GC to remove the round's sandboxes",
             timeout=ROUND_BOUND + GC_PERIOD, every=1, detail=here.kubelet.log_tail)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each, interleaved")
    parser.add_argument("--runtime", default="containerd-2.1",
                        choices=[r.key for r in RUNTIMES])
    args = parser.parse_args(argv)
    if os.geteuid() != 0 or missing():
        print(f"benchmarks.kubelet: needs root and a built kubelet ({missing()})",
              file=sys.stderr)
        return 2
    runtime = next(r for r in RUNTIMES if r.key == args.runtime)
    work = Path(tempfile.mkdtemp(prefix="dgkl-bench-"))
    image = ImageArchive()
    series: dict[str, list[float]] = {"without": [], "with": []}
    try:
        shared = Shared(cri.load_stubs(CACHE), pause_image.build(work), image)
        with site(runtime, True, shared) as here:
            for i in range(args.rounds):
                order = (False, True) if i % 2 == 0 else (True, False)
                for guarded in order:
                    label = "with" if guarded else "without"
                    seconds = one_round(here, guarded, f"r{i}{label[0:2]}", args.pods)
                    series[label].append(round(seconds, 3))
                    print(f"round {i + 1} {label} the guard: {seconds:.2f} s", file=sys.stderr)
    finally:
        image.close()
        shutil.rmtree(work)
    medians = {k: statistics.median(v) for k, v in series.items()}
    ratio = medians["with"] / medians["without"]
    # Each round's pair ran back to back: its ratio shows how much of the spread is the load's.
    pairs = [round(w / wo, 3) for w, wo in zip(series["with"], series["without"], strict=True)]
    print(json.dumps({
        "runtime": f"{runtime.key} {runtime.version()}",
        "pods": args.pods, "rounds": args.rounds, "seconds": series,
        "median_seconds": {k: round(v, 3) for k, v in medians.items()},
        "ratio_with_to_without": round(ratio, 3), "target": TARGET, "met": ratio <= TARGET,
        "paired_ratios": pairs, "median_paired_ratio": statistics.median(pairs),
        "load_average": os.getloadavg(),
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
