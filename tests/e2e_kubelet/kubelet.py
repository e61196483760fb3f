"""A real kubelet (peers/pins.tsv's row, built by tools/install-peers.sh), standalone, on a node.

Standalone as the kubelet runs with no kubeconfig: no API server, pods only from static manifests
in a dir of the node's. It talks CRI to the node's containerd and runs inside the node's mount and
network namespaces (node.py). Its KubeletConfiguration is its own (config()): every choice has
its reason beside it. Its root dir, certs, pod logs, manifests and log file are under the node's
temp dir; its cgroups under a root named after the node, removed with the node.

What the tests read from it: the pods' status as the kubelet sees it, from its read-only port on
the node's own 127.0.0.1 (a standalone kubelet serves static pods with their status on /pods),
and its own log (-v=3: probe results and the GC's failures are there).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e_kubelet.node import Node
from tests.support import peers
from tests.support.daemon import Answer, Daemon
from tests.support.waiting import wait_for

# The kubelet rows of peers/pins.tsv, oldest first. Every scenario runs on VERSION; the newest
# minor runs the subset scenarios.py names (docs/support.md says which minors were run).
VERSIONS = ("v1.35.4", "v1.37.2")
VERSION = VERSIONS[0]
NEWEST = VERSIONS[-1]
READ_ONLY_PORT = 10255  # the kubelet's usual one: inside the node's network namespace, so no clash
GC_PERIOD = 60  # seconds: pkg/kubelet/kubelet.go ContainerGCPeriod, not configurable
START_BOUND = 180  # seconds from exec to /pods answering, under the other helpers' load
VERBOSITY = "3"  # "Probe succeeded" and the status manager's decisions are logged from 3 up
STORM_PERIODS = 3  # GC periods (and failed passes) a stuck sandbox survives: "several", a storm
DESTROY_FAILED = "failed to destroy network for sandbox"  # the runtime's error, in its log
GC_STOP_FAILED = "Failed to stop sandbox before removing"  # kuberuntime_gc.go removeSandbox

# The cgroup v1 hierarchies the kubelet's cgroupfs driver creates its cgroups in (libcontainer's
# subsystems plus the named systemd one); the cgroup root must exist in each before it starts.
V1_ROOT = Path("/sys/fs/cgroup")

FETCH = r"""
import sys, urllib.error, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=20) as r:
        sys.stdout.write(r.read().decode())
except (urllib.error.URLError, OSError) as e:
    sys.stderr.write(str(e)); sys.exit(3)
"""


def binary(version: str = VERSION) -> Path:
    return peers.find("kubelet", version).bin("kubelet")


def missing() -> str | None:
    for version in VERSIONS:
        if not peers.find("kubelet", version).built():
            return f"kubelet {version} is not built: run tools/install-peers.sh kubelet"
    return None


@dataclass
class Kubelet:
    node: Node
    daemon: Daemon | None = None  # while it runs
    starts: int = 0
    version: str = VERSION  # the kubelet row it runs

    # --- paths -------------------------------------------------------------------------------

    @property
    def home(self) -> Path:
        return self.node.tmp / "kubelet"

    @property
    def manifests(self) -> Path:
        return self.node.tmp / "manifests"

    @property
    def log_path(self) -> Path:
        return self.node.tmp / "logs" / "kubelet.log"

    @property
    def cgroup_root(self) -> str:
        return f"/{self.node.name}"

    @property
    def node_name(self) -> str:
        """The node's name as the kubelet has it: static pods are named <name>-<node name>."""
        return self.node.name

    def config(self) -> dict[str, Any]:
        tmp = self.node.tmp
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # This machine has cgroup v1; 1.35 and 1.37 refuse to start there unless told
            # (KEP-5573: pkg/kubelet/apis/config/validation/validation_linux.go, default true
            # since 1.35; v1.37.2's still has the field and its cgroup v1 manager).
            "failCgroupV1": False,
            # Swap may be on on a test machine; the kubelet's NoSwap default keeps pods off it.
            "failSwapOn": False,
            # No systemd here: cgroupfs, as runc's default in the runtime's config. containerd
            # 2.1 reports it over CRI's RuntimeConfig; 1.6 does not implement it and the kubelet
            # falls back to this (cmd/kubelet/app/server.go getCgroupDriverFromCRI).
            "cgroupDriver": "cgroupfs",
            # Its kubepods tree under a root of the node's, never the host's /kubepods.
            "cgroupRoot": self.cgroup_root,
            "containerRuntimeEndpoint": f"unix://{self.node.socket}",
            "staticPodPath": str(self.manifests),
            "podLogsDir": str(tmp / "pod-logs"),
            "volumePluginDir": str(tmp / "volume-plugins"),
            "resolvConf": str(tmp / "resolv.conf"),  # not the host's: pods get 127.0.0.1
            # No API server: no webhook to ask, and the authenticated server is off.
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "enableServer": False,
            "healthzPort": 0,
            "address": "127.0.0.1",
            "readOnlyPort": READ_ONLY_PORT,
            # The KUBE-IPTABLES-HINT and KUBE-FIREWALL chains are the host's business.
            "makeIPTablesUtilChains": False,
            # Read the kernel settings, never write them (node.py serves the values it wants).
            "protectKernelDefaults": True,
            # An empty map is no hard threshold at all (server.go: only a missing one is
            # defaulted): a test machine's full disk or low memory must not evict the pods.
            "evictionHard": {},
            # 100 turns image GC off: the imported images can never be pulled again.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
        }

    def argv(self, config: Path) -> list[str]:
        return [str(binary(self.version)), f"--config={config}", f"--root-dir={self.home}",
                f"--cert-dir={self.home / 'pki'}", f"--hostname-override={self.node_name}",
                f"--v={VERBOSITY}"]

    # --- life --------------------------------------------------------------------------------

    def start(self) -> None:
        """Started in the node (its enter prefix is the holder's of this boot), ready when it
        serves (serving())."""
        assert self.daemon is None
        tmp = self.node.tmp
        for d in (self.home, self.manifests, tmp / "pod-logs", tmp / "volume-plugins"):
            d.mkdir(parents=True, exist_ok=True)
        (tmp / "resolv.conf").write_text("nameserver 127.0.0.1\n", encoding="ascii")
        config = tmp / "kubelet-config.json"
        config.write_text(json.dumps(self.config(), indent=1), encoding="utf-8")
        make_cgroup_root(self.cgroup_root)
        self.daemon = Daemon(
            "kubelet", [*self.node.enter_all, *self.argv(config)], self.log_path,
            ready=Answer(self.serving, "it to serve"),
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"},
            start_bound=START_BOUND, check_every=0.5, starts=self.starts)
        self.starts += 1
        self.daemon.start()

    def serving(self) -> bool:
        """Its read-only port answers /pods (a standalone kubelet's one API)."""
        return self.pods_or_none() is not None

    def stop(self) -> None:
        """SIGTERM, a bounded wait, then SIGKILL (teardown)."""
        if self.daemon is not None:
            self.daemon.stop()
            self.daemon = None

    def kill(self) -> None:
        """SIGKILL, as a crash or a power cut would."""
        if self.daemon is not None:
            self.daemon.kill()
            self.daemon = None

    def reap(self) -> None:
        """Wait for a kubelet that was killed with the node's processes."""
        if self.daemon is not None:
            self.daemon.reap(timeout=60)
            self.daemon = None

    # --- static pods -------------------------------------------------------------------------

    def put(self, name: str, pod: dict[str, Any]) -> Path:
        """Write (or replace) a static pod's manifest atomically: the kubelet's file source
        skips dot files, so a half-written file is never read."""
        path = self.manifests / f"{name}.json"
        tmp = self.manifests / f".{name}.json.tmp"
        tmp.write_text(json.dumps(pod, indent=1), encoding="utf-8")
        tmp.rename(path)
        return path

    def delete(self, name: str) -> None:
        """Remove a static pod's manifest: the kubelet deletes the pod."""
        (self.manifests / f"{name}.json").unlink()

    # --- what it says ------------------------------------------------------------------------

    def pods_or_none(self) -> list[dict[str, Any]] | None:
        """The pods the kubelet runs, with their status (static pods carry it standalone), or
        None while it does not answer."""
        url = f"http://127.0.0.1:{READ_ONLY_PORT}/pods"
        out = subprocess.run([*self.node.enter_all, sys.executable, "-I", "-c", FETCH, url],
                             capture_output=True, text=True, timeout=60, check=False)
        if out.returncode != 0:
            return None
        items: list[dict[str, Any]] = json.loads(out.stdout).get("items") or []
        return items

    def pods(self) -> list[dict[str, Any]]:
        found = self.pods_or_none()
        if found is None:
            raise RuntimeError(f"the kubelet does not answer on /pods:\n{self.log_tail()}")
        return found

    def pod(self, name: str, other_than: str | None = None) -> dict[str, Any] | None:
        """The static pod made from manifest `name` (the kubelet appends the node's name), not
        the one of uid `other_than` (a replaced manifest's pod lingers while it is killed)."""
        full = f"{name}-{self.node_name}"
        return next((p for p in self.pods() if p["metadata"]["name"] == full
                     and p["metadata"].get("uid") != other_than), None)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def log_lines(self, *needles: str) -> list[str]:
        """The kubelet's log lines that contain every needle."""
        return lines_with(self.log_text(), *needles)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def lines_with(log: str, *needles: str) -> list[str]:
    """The lines of a log that contain every needle."""
    return [line for line in log.splitlines() if all(n in line for n in needles)]


def gc_verdict(log: str, gone: bool, present: set[str], subjects: set[str],
               waited: float) -> str | None:
    """'removed' once gone; 'stuck' once a subject still present has failed (the runtime's
    DESTROY_FAILED in the kubelet's log) for STORM_PERIODS GC periods, `waited` seconds. Where it
    is the GC that fails on a subject (GC_STOP_FAILED: a stopped sandbox, as in double-del; a
    sandbox still ready is the pod worker's to stop, never the GC's), also not before the GC has
    failed STORM_PERIODS passes: its first pass after a delete comes at any phase of its period
    and may find the sandbox not yet its to remove, so three periods once held two passes."""
    if gone:
        return "removed"
    left = subjects & present
    failing = any(lines_with(log, sid, DESTROY_FAILED) for sid in left)
    passes = max((len(lines_with(log, sid, GC_STOP_FAILED)) for sid in left), default=0)
    counted = passes == 0 or passes >= STORM_PERIODS
    old = waited >= STORM_PERIODS * GC_PERIOD
    return "stuck" if old and failing and counted else None


def wait_gc_verdict(kubelet: Kubelet, sandbox_ids: Callable[[], set[str]],
                    gone: Callable[[], bool], subjects: set[str], since: float, *,
                    timeout: float, every: float) -> str:
    """gc_verdict on the kubelet's log, polled from `since` (monotonic) until it has one."""
    def verdict() -> str | None:
        return gc_verdict(kubelet.log_text(), gone(), sandbox_ids(), subjects,
                          time.monotonic() - since)

    return wait_for(verdict, "the kubelet to remove the stale sandboxes, or to fail at it for "
                    f"{STORM_PERIODS} GC periods", timeout=timeout, every=every,
                    detail=kubelet.log_tail)


def is_ready(pod: dict[str, Any] | None) -> bool:
    """The kubelet's Ready condition of a pod (False for a pod it does not run)."""
    if pod is None:
        return False
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def make_cgroup_root(root: str) -> None:
    """The kubelet's cgroup root in every v1 hierarchy (it refuses a root that does not exist);
    a new cpuset cgroup gets its parent's cpus and mems, as the kernel wants before any task."""
    for hierarchy in sorted(V1_ROOT.iterdir()):
        if not (hierarchy / "cgroup.procs").exists() or (hierarchy / "cgroup.controllers").exists():
            continue  # not a v1 hierarchy (the unified one has cgroup.controllers)
        target = hierarchy / root.lstrip("/")
        target.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if (hierarchy / name).exists() and not (target / name).read_text().strip():
                (target / name).write_text((hierarchy / name).read_text())


# --- static pods -------------------------------------------------------------------------------

NAMESPACE = "dgkl"


def plain_pod(name: str, image: str) -> dict[str, Any]:
    """A static pod of one container that only waits (the pause program), never pulled."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never",
                            "command": ["/pause"]}],
            "enableServiceLinks": False,
            "dnsPolicy": "Default",
            "terminationGracePeriodSeconds": 5,
        },
    }
