"""The reported stack on a node of the tests' own: the conf dir of a Cozystack v1.2.0 node on
Talos (its kubeovn-cilium variant), multus thick in auto mode in front of cilium's generic-veth
list (the real kube-ovn CNI, portmap, the real cilium-cni), with the guard put in front by its
own installer, as its DaemonSet does (issue 43; shared/BACKGROUND.md).

The runtime's conf dir holds, as on that node:

- `05-cilium.conflist`, "generic-veth", written by cilium-agent (the stand-in below writes
  tests/fakes/cilium_agent.py's COZYSTACK_CONFLIST, whose comment cites cozystack v1.2.0
  packages/system/cilium: values-kubeovn.yaml, templates/cni.yaml and the chart's
  cilium-configmap.yaml): kube-ovn with `server_socket` and `ipam.server_socket`, portmap with
  `snat: true`, cilium-cni; cniVersion 0.3.1. Cozystack's platform package picks that variant
  on Talos (packages/core/platform/sources/networking.yaml).
- `10-kube-ovn.conflist`: kube-ovn's own (dist/images/01-kube-ovn.conflist, v1.15.3: kube-ovn
  with its `server_socket`, portmap; cniVersion 0.3.1) under Cozystack's CNI_CONFIG_PRIORITY 10,
  mode 0600 as kube-ovn-cni writes it (cmd/daemon/cniserver.go:204-224, which leaves an existing
  one alone). 05 sorts first, so nothing runs it while 05 is there.
- `00-multus.conf`, multus-shim, written by multus's daemon in auto mode: its `clusterNetwork` is
  the path of 05, the first conflist not its own (multus issue 1449: on DEL the list loses
  `server_socket`). While multus's daemon is down the file is gone and the runtime runs 05.

The binaries: the real kube-ovn CNI plugin and the real cilium-cni (peers/pins.tsv's kube-ovn and
cilium rows; cilium at v1.19.1, the version Cozystack v1.2.0 pins), Debian's portmap and loopback.
The pods ask for no port mappings, so portmap touches no iptables (containernetworking/plugins
v1.1.1 plugins/meta/portmap/main.go: ADD hands back prevResult, DEL returns at once).

What runs in the node (its mount namespace; each a DaemonSet's pod on a real node, so each dies
with the node at a power-off and is started again by `node_up`):

- kube-ovn's daemon: tests/fakes/kube_ovn_daemon.py (a stand-in: its header says what it copies)
  on /run/openvswitch/kube-ovn-daemon.sock, its pod cache the chain's API server;
  `kube_ovn.mode(...)` sets its modes and kube-ovn's timing. kube-ovn-controller's part (each
  pod's address allocated, and freed when the pod is deleted): tests/fakes/kube_ovn_controller.py,
  a thread of the test, as the controller is off the node.
  The veths' host ends go into the node's network namespace (`node_netns`), where the runtime
  and its plugins run. kube-ovn's daemon and multus's daemon run in the node's network namespace
  too, as their hostNetwork pods do, where the API server listens (tests/support/nodeapi.py), so
  multus's delegates run there; cilium-agent and the installer run in the node's mount namespace
  only (they use no network).
- cilium-agent: tests/fakes/cilium_agent.py (a stand-in) on /run/cilium/cilium.sock, up, down
  (`cilium.stop()`) or booting (CILIUM_BOOT s after a boot): what cilium-cni does when the agent
  is away (its deletion queue, its failing ADD) is the real plugin's own code.
- multus-daemon (peers/pins.tsv's multus rows: v4.2.3, the report's, or v4.3.0) with Cozystack's
  daemon-config.json (cozystack/cozystack packages/system/multus/templates/
  multus-daemonset-thick.yml: cniVersion 0.3.1, logLevel verbose, cniConfigDir and
  multusAutoconfigDir the node's conf dir, multusConfigFile auto, socketDir /run/multus/), its
  paths the node's; it removes `00-multus.conf` when it stops (pkg/server/config/manager.go:163),
  and runs under the chart's CPU limit, 100m (tests/support/cpulimit.py), with every delegate it
  execs. Left out of the daemon config: `chrootDir` (the daemon runs in the node already) and
  `logToStderr` (its log goes to a file, where the tests count its requests).
- with the guard: `cni-delguard install --watch` (the frozen bundle, as the DaemonSet's container
  runs it), which wraps `00-multus.conf` and wraps it again each time multus writes it anew.

The pods are in the chain's API server (tests/support/kubeapi.py) for as long as a scenario
says, with the node's name, as the daemon's informer lists them.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fakes.kube_ovn_controller import KubeOvnController
from tests.support import peers
from tests.support.cilium import CILIUM_BOOT, CiliumAgent
from tests.support.cpulimit import CpuLimit
from tests.support.daemon import Daemon, Record
from tests.support.guard import frozen_binary
from tests.support.kubeapi import KubeAPI
from tests.support.multus import NODE, MultusThick
from tests.support.nodeapi import NodeKubeAPI
from tests.support.paths import widen
from tests.support.records import read_jsonl
from tests.support.waiting import wait_for

KUBE_OVN = ("kube-ovn", "v1.14.10")  # peers/pins.tsv's row
CILIUM = ("cilium", "v1.19.1")  # peers/pins.tsv's row: the version Cozystack v1.2.0 pins
KUBE_OVN_CONF = "10-kube-ovn.conflist"
CILIUM_CONF = "05-cilium.conflist"
MULTUS_CONF = "00-multus.conf"
SOCKET = "/run/openvswitch/kube-ovn-daemon.sock"  # inside the node
CNI_VERSION = "0.3.1"
MULTUS_CPU = 100  # millicores: Cozystack's kube-multus limits.cpu
# The installer's first wrap on a node: it copies and verifies the bundle (733 files, 39 MiB,
# each hashed) first; 39 s of that at load average 50 on 2 cores, so 60 s was too short once.
WRAP_BOUND = 240
FAKES = Path(__file__).resolve().parents[1] / "fakes"
DAEMON = FAKES / "kube_ovn_daemon.py"
# The matrix's chain name for each multus version (tests/support/matrix.py)
DELEGATES = {"v4.3.0": "cozystack-multus-v4.3.0", "v4.2.3": "cozystack-multus-v4.2.3"}


def kube_ovn_conflist() -> dict[str, Any]:
    return {"name": "kube-ovn", "cniVersion": CNI_VERSION, "plugins": [
        {"type": "kube-ovn", "server_socket": SOCKET},
        {"type": "portmap", "capabilities": {"portMappings": True}}]}


def kube_ovn_plugin() -> Path:
    peer = peers.built_or_skip(*KUBE_OVN)
    return peer.bin("cni")


def cilium_plugin() -> Path:
    return peers.built_or_skip(*CILIUM).bin("cilium-cni")


def node_netns(enter: tuple[str, ...]) -> str:
    """The node's network namespace, from the argv prefix that enters the node: the one it
    enters, or its holder's (a node whose runtime alone enters it). Never the machine's own: a
    node without one of its own is refused."""
    for arg in enter:
        if arg.startswith("--net="):
            return arg.removeprefix("--net=")
    mount = next(a.removeprefix("--mount=") for a in enter if a.startswith("--mount="))
    path = str(Path(mount).with_name("net"))
    if os.readlink(path) == os.readlink("/proc/self/ns/net"):
        raise RuntimeError("the node has no network namespace of its own: kube-ovn's host ends "
                           "would land in the machine's")
    return path


def with_net(enter: tuple[str, ...]) -> tuple[str, ...]:
    """The same prefix entering the node's network namespace too (`node_netns`): a node whose
    prefix enters only its mount namespace (the kubelet suite's) gets its holder's."""
    if any(a.startswith("--net=") for a in enter):
        return enter
    return (enter[0], f"--net={node_netns(enter)}", *enter[1:])


def mount_only(enter: tuple[str, ...]) -> tuple[str, ...]:
    """The same prefix without the node's network namespace, for the stack's processes that use
    no network (kube-ovn's daemon is told the node's namespace for its veths)."""
    return tuple(a for a in enter if not a.startswith("--net="))


@dataclass
class KubeOvnDaemon:
    """The stand-in for kube-ovn's daemon, run in the node (tests/fakes/kube_ovn_daemon.py)."""

    work: Path
    run: Path  # the node's /run as the host sees it
    api: KubeAPI | None = None  # its informer's pods (none: every pod there and allocated)
    proc: Daemon | None = None  # while it runs
    starts: int = 0
    _process: Daemon | None = None

    @property
    def settings(self) -> Path:
        return self.work / "kube-ovn-daemon.json"

    @property
    def record(self) -> Path:
        return self.work / "kube-ovn-daemon.jsonl"

    @property
    def ports(self) -> Path:
        """Its ports (standing for OVS ports): on disk, so they outlive a reboot as OVSDB's do."""
        return self.work / "kube-ovn-ports"

    @property
    def socket(self) -> Path:
        return self.run / SOCKET.removeprefix("/run/")

    def mode(self, add: str = "healthy", delete: str = "healthy", delay: float = 0,
             **timing: float | None) -> None:
        """Its modes, and kube-ovn's timing (ovn_installed_after, gateway_after: the stand-in's
        header says what each does)."""
        body = {"add": add, "del": delete, "delay": delay, **timing}
        tmp = self.settings.with_suffix(".tmp")
        tmp.write_text(json.dumps(body), encoding="utf-8")
        tmp.rename(self.settings)

    def start(self, enter: tuple[str, ...], after: float = 0) -> None:
        """Started in the node; with `after`, it binds its socket only that many seconds later
        (down until then: "restart"), and is not waited for."""
        assert self.proc is None
        if not self.settings.exists():
            self.mode()
        self.starts += 1
        argv = [*with_net(enter), sys.executable, "-I", str(DAEMON), "--settings",
                str(self.settings), "--record", str(self.record), "--ports", str(self.ports),
                "--node-netns", node_netns(enter), "--start-after", str(after)]
        if self.api is not None:
            argv += ["--api", self.api.url, "--api-ca", str(self.api.cert), "--node", NODE]
        if self._process is None:
            # It records "listening" once its socket is bound and listening (the record, not the
            # socket: a check of the socket would see the bind before the record is there).
            self._process = Daemon(
                "kube-ovn's daemon", argv, self.work / "kube-ovn-daemon.out",
                ready=Record(self.record, lambda r: r["phase"] == "listening", "listening"))
        self._process.argv = argv
        self.proc = self._process
        self._process.start(wait=after == 0)

    def stop(self) -> None:
        """Down: the process gone and its socket removed, as start-cniserver.sh's exit trap does."""
        if self.proc is None:
            return
        self.proc.kill()
        self.proc = None
        self.socket.unlink(missing_ok=True)

    def node_down(self) -> None:
        """Killed with the node (its socket went with the node's /run)."""
        if self.proc is not None:
            self.proc.reap()
            self.proc = None

    def requests(self, endpoint: str, container: str | None = None) -> list[dict[str, Any]]:
        """The requests that reached it for /api/v1/<endpoint> (of one container)."""
        return [r for r in read_jsonl(self.record)
                if r["phase"] == "start" and r.get("path") == f"/api/v1/{endpoint}"
                and container in (None, r["request"].get("container_id"))]

    def held_ports(self) -> list[str]:
        """The attachments whose port was made and never deleted."""
        return sorted(p.name for p in self.ports.glob("*")) if self.ports.is_dir() else []


@dataclass
class Installer:
    """`cni-delguard install --watch` in the node, as the guard's DaemonSet container runs it:
    the frozen bundle from dist/, the node's CNI dirs, the guard's log in the node's dir. Not
    awaited when started: it is ready when the conf is wrapped (ReportedStack.wait_wrapped)."""

    conf_dir: Path
    bin_dir: Path
    log_file: Path
    out: Path
    proc: Daemon | None = None

    def start(self, enter: tuple[str, ...]) -> None:
        assert self.proc is None
        self.proc = Daemon(
            "the installer",
            [*mount_only(enter), str(frozen_binary()), "install", "--watch", "--layout", "standard",
             "--conf-dir", str(self.conf_dir), "--bin-dir", str(self.bin_dir), "--log-file",
             str(self.log_file)], self.out)
        self.proc.start(wait=False)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    def node_down(self) -> None:
        if self.proc is not None:
            self.proc.reap()
            self.proc = None

    def text(self) -> str:
        try:
            return self.out.read_text(errors="replace")
        except FileNotFoundError:
            return ""


@dataclass
class ReportedMultus(MultusThick):
    """multus-daemon as Cozystack runs it: its conf in the runtime's conf dir, its CPU limited."""

    runtime_conf: Path | None = None  # the runtime's conf dir (the host's view)
    limit: CpuLimit | None = None
    node_enter: tuple[str, ...] = ()
    # seconds from each start to its conf written (its socket serving): under the CPU limit the
    # shim's ADD waits this long, and fails after 60 s ("timed out waiting for the condition")
    ready_seconds: list[float] = field(default_factory=list)

    @property
    def conf_dir(self) -> Path:
        assert self.runtime_conf is not None
        return self.runtime_conf

    def configure(self, bin_dir: Path, work: Path, api: KubeAPI) -> None:
        self.work, self.api = work, api
        (bin_dir / "multus-shim").symlink_to(self._bin("multus-shim"))
        config = {  # Cozystack's daemon-config.json, with this node's paths
            "cniVersion": CNI_VERSION, "logLevel": "verbose", "logToStderr": False,
            "logFile": str(self.log), "cniConfigDir": str(self.conf_dir),
            "multusAutoconfigDir": str(self.conf_dir), "multusConfigFile": "auto",
            "socketDir": "/run/multus/", "binDir": str(bin_dir),
        }
        (work / "daemon-config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")

    def _bin(self, command: str) -> Path:
        return peers.built_or_skip("multus", self.version).bin(command)

    def start_in(self, enter: tuple[str, ...]) -> None:
        """Started in the node, inside its CPU limit (made again after a power-off)."""
        assert self.limit is not None
        self.node_enter = enter
        self.limit.create()
        self.enter = (*with_net(enter), *self.limit.enter())  # hostNetwork
        began = time.monotonic()
        self.start_daemon()
        self.ready_seconds.append(round(time.monotonic() - began, 1))

    def node_up(self, enter: tuple[str, ...]) -> None:
        self.start_in(enter)

    def restart(self) -> None:
        self.stop_daemon()
        self.start_in(self.node_enter)


@dataclass
class ReportedStack:
    """The whole stack on one node (tests/e2e_cri/node.py's), with or without the guard."""

    version: str  # multus's: a row of peers/pins.tsv
    guarded: bool
    node_name: str
    bin_dir: Path
    conf_dir: Path
    run: Path
    work: Path
    api: NodeKubeAPI = field(init=False)
    kube_ovn: KubeOvnDaemon = field(init=False)
    kube_ovn_controller: KubeOvnController = field(init=False)
    cilium: CiliumAgent = field(init=False)
    multus: ReportedMultus = field(init=False)
    installer: Installer | None = field(init=False, default=None)

    @property
    def delegate(self) -> str:
        return DELEGATES[self.version]

    @property
    def guard_log(self) -> Path:
        return self.work / "delguard.log"

    def start(self, enter: tuple[str, ...]) -> None:
        """Install the binaries and kube-ovn's conflist, start the API, kube-ovn's daemon,
        cilium-agent (which writes 05-cilium.conflist), multus's daemon (which picks 05 as the
        first conflist not its own) and (guarded) the installer; ready once the conf the runtime
        reads is the final one."""
        self.work.mkdir(parents=True, exist_ok=True)
        (self.bin_dir / "kube-ovn").symlink_to(kube_ovn_plugin())
        (self.bin_dir / "cilium-cni").symlink_to(cilium_plugin())
        conf = self.conf_dir / KUBE_OVN_CONF
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(kube_ovn_conflist(), f, indent=1)
        self.api = NodeKubeAPI(self.work / "api")
        self.api.start_in(node_netns(enter))
        self.kube_ovn_controller = KubeOvnController(self.api, NODE)
        self.kube_ovn_controller.start()
        self.kube_ovn = KubeOvnDaemon(self.work, self.run, self.api)
        self.kube_ovn.start(enter)
        self.cilium = CiliumAgent(self.work, self.run, self.conf_dir / CILIUM_CONF)
        self.cilium.start(mount_only(enter))
        self.multus = ReportedMultus(version=self.version, run=self.run,
                                     runtime_conf=self.conf_dir,
                                     limit=CpuLimit(self.node_name, "multus-daemon", MULTUS_CPU))
        self.multus.configure(self.bin_dir, self.work, self.api)
        self.multus.start_in(enter)
        if self.guarded:
            widen(self.bin_dir)  # the guard's log is under the temp dir (tests/support/paths.py)
            self.installer = Installer(self.conf_dir, self.bin_dir, self.guard_log,
                                       self.work / "installer.out")
            self.installer.start(enter)
            self.wait_wrapped()

    # --- what the node's conf dir holds --------------------------------------------------------

    def multus_conf(self) -> dict[str, Any] | None:
        try:
            body = json.loads((self.conf_dir / MULTUS_CONF).read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        return body if isinstance(body, dict) else None

    def wrapped(self) -> bool:
        conf = self.multus_conf()
        return conf is not None and conf.get("type") == "cni-delguard"

    def wait_wrapped(self, timeout: float = WRAP_BOUND) -> None:
        def detail() -> str:
            return self.installer.text()[-3000:] if self.installer else ""

        wait_for(self.wrapped, "the installer to wrap 00-multus.conf", timeout=timeout,
                 every=0.1, detail=detail)

    def final_conf(self) -> str:
        """What the runtime's loaded conf must say once the stack is up: its plugin type."""
        return "cni-delguard" if self.guarded else "multus-shim"

    # --- the pods -------------------------------------------------------------------------------

    def put_pod(self, namespace: str, name: str, uid: str) -> None:
        self.api.put_pod(namespace, name, uid, NODE)

    # --- the node's life ------------------------------------------------------------------------

    def node_down(self) -> None:
        """Everything in the node died with it."""
        self.multus.node_down()
        self.kube_ovn.node_down()
        self.cilium.node_down()
        if self.installer is not None:
            self.installer.node_down()

    def node_up(self, enter: tuple[str, ...], kube_ovn_after: float = 0,
                multus: bool = True) -> None:
        """The DaemonSets' pods back on the booted node: kube-ovn's daemon (after
        `kube_ovn_after` seconds), cilium-agent (booting CILIUM_BOOT seconds), multus's daemon
        (unless `multus` is false: the caller starts it later with `multus.node_up`), the
        installer."""
        self.api.move(node_netns(enter))  # the booted node's network namespace is a new one
        self.kube_ovn.start(enter, after=kube_ovn_after)
        self.cilium.start(mount_only(enter), after=CILIUM_BOOT)
        if multus:
            self.multus.node_up(enter)
        if self.installer is not None:
            self.installer.start(enter)
            if multus:
                self.wait_wrapped()

    def daemons_up(self, enter: tuple[str, ...]) -> None:
        """kube-ovn's and multus's daemons started again on a running node (their pods
        restarted); with the guard, ready once the running installer has wrapped multus's conf
        again."""
        self.kube_ovn.start(enter)
        self.multus.start_in(enter)
        if self.installer is not None:
            self.wait_wrapped()

    def stop(self) -> None:
        if self.installer is not None:
            with contextlib.suppress(Exception):
                self.installer.stop()
        with contextlib.suppress(Exception):
            self.multus.stop_daemon()
        with contextlib.suppress(Exception):
            self.kube_ovn.stop()
        with contextlib.suppress(Exception):
            self.kube_ovn_controller.stop()
            self.cilium.stop()
        with contextlib.suppress(Exception):
            self.api.stop()

    # --- counts ---------------------------------------------------------------------------------

    def multus_dels(self, container: str | None = None) -> int:
        return self.multus.requests("DEL", container)

    def kube_ovn_dels(self, container: str | None = None) -> int:
        return len(self.kube_ovn.requests("del", container))

    def multus_cpu(self) -> float:
        assert self.multus.limit is not None
        return self.multus.limit.usage_seconds()



