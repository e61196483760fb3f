"""The real multus v4.3.0 (peers/pins.tsv) in front of a kube-ovn-like delegate: the chains
"multus-thin", "multus-thin-path" and "multus-thick" of tests/support/chains.py.

Both are configured the way the report's users run them, with kube-ovn's conflist as the network
multus delegates to (kube-ovn writes it into the node's conf dir: type kube-ovn with its
`server_socket`, cniVersion 0.3.1; its `portmap` entry is left out, since it would edit the
iptables of the namespace the daemon runs in and takes no part in DEL):

- thin, as multus's thin entrypoint writes 00-multus.conf: kube-ovn's conflist inline in
  `delegates`, a `kubeconfig` (`Thin.INLINE`); or with `clusterNetwork` naming the conflist by
  its path, the other form multus documents (`Thin.CLUSTER_NETWORK_PATH`);
- thick, as Cozystack deploys it (its daemon-config.json: cniVersion 0.3.1, multusConfigFile
  "auto"), so the daemon finds kube-ovn's conflist itself and sets `clusterNetwork` to its path
  (pkg/server/config/manager.go:202); the shim's conf is the one the daemon writes.

What multus v4.3.0 does with these on DEL, from its source (pkg/multus/multus.go, pkg/types/
conf.go, pkg/k8sclient/k8sclient.go, pkg/server/api/shim.go) and shown by tests/multus_chain:

- A delegate loaded from a conflist FILE PATH (clusterNetwork as a path: thick always) keeps two
  copies: the libcni list with every plugin's raw bytes, which ADD uses (multus.go:311-312), and
  `Bytes`, the list re-marshalled from CNI's typed PluginConf, which drops every key the type does
  not know (conf.go:105): `server_socket` too. DEL and CHECK use `Bytes` (multus.go:585, 355),
  from the cache (which saved `Bytes`) or rebuilt: EVERY DEL reaches kube-ovn without
  `server_socket`, with or without multus's cache (upstream issue 1449, fixed after v4.3.0 by
  PR 1521).
- A delegate given inline or by name (thin as its entrypoint writes it) keeps its raw bytes on
  every path: no DEL loses `server_socket`. A DEL without a cache (multus.go:1062-1089) calls no
  delegate when the pod is gone from the API or has another UID, or there is no kubeconfig, and
  calls kube-ovn with its full config when the pod is still there.
- Thick: the shim returns success for every DEL and only logs the daemon's error (shim.go:69-76),
  while every DEL still costs the daemon a request, a pod lookup (its informer's cache) and a
  delegate exec.

Everything a chain makes lives under its work dir; the daemon runs in the node's mount namespace
(`enter`: the argv prefix that enters it, e.g. tests/support/nodens.NodeNS.enter), where
/var/lib/cni/multus is the node's and its service account files are written under the node's
/run. The API server is tests/support/kubeapi.py unless a chain is given another (`api`: the real
one of tests/e2e_cluster, an ApiServer); the end delegate tests/fakes/kube_ovn.py.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from tests.support import peers
from tests.support.chains import Behaviour, Pod
from tests.support.daemon import Daemon, FileWritten
from tests.support.fakes import install_kube_ovn
from tests.support.kubeapi import KubeAPI
from tests.support.records import matching, read_jsonl

VERSION = "v4.3.0"
CNI_VERSION = "0.3.1"  # kube-ovn's conflist and Cozystack's daemon-config.json
NODE = "dgmu-node"  # spec.nodeName of the chains' pods and the daemon's MULTUS_NODE_NAME
KUBE_OVN_CONF = "10-kube-ovn.conflist"  # kube-ovn's name with Cozystack's CNI_CONFIG_PRIORITY 10
SERVICE_ACCOUNT = "/run/secrets/kubernetes.io/serviceaccount"  # /var/run is /run
NODE_SOCKET_DIR = "/run/multus"  # the thick DaemonSet's hostPath for the daemon's socket


def multus_bin(command: str, version: str = VERSION) -> Path:
    return peers.built_or_skip("multus", version).bin(command)


@dataclass
class KubeOvn:
    """The end delegate (tests/fakes/kube_ovn.py): its settings, state, record and "daemon"."""

    work: Path

    @property
    def settings(self) -> Path:
        return self.work / "settings.json"

    @property
    def record(self) -> Path:
        return self.work / "record.jsonl"

    @property
    def state(self) -> Path:
        return self.work / "state"

    @property
    def socket(self) -> Path:
        # kube-ovn's is /run/openvswitch/kube-ovn-daemon.sock; the work dir is seen the same from
        # the host and from inside the node, so the chain owns it wherever multus runs.
        return self.work / "kube-ovn-daemon.sock"

    def install(self, bin_dir: Path) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        self.behave(Behaviour())
        self.daemon(True)
        install_kube_ovn(bin_dir, self.settings)

    def behave(self, behaviour: Behaviour) -> None:
        body: dict[str, Any] = {"stateDir": str(self.state), "recordFile": str(self.record),
                                "hang": list(behaviour.hang), "hangSeconds": behaviour.hang_seconds,
                                "failAdd": behaviour.fail_add, "failDel": behaviour.fail_del}
        tmp = self.settings.with_suffix(".tmp")
        tmp.write_text(json.dumps(body), encoding="utf-8")
        tmp.rename(self.settings)

    def daemon(self, up: bool) -> None:
        """kube-ovn-cni's daemon up (its socket there) or down (every RPC fails, code 11)."""
        if up:
            self.socket.touch()
        else:
            self.socket.unlink(missing_ok=True)

    def conflist(self) -> dict[str, Any]:
        socket = str(self.socket)
        return {"name": "kube-ovn", "cniVersion": CNI_VERSION, "plugins": [
            {"type": "kube-ovn", "server_socket": socket,
             "ipam": {"type": "kube-ovn", "server_socket": socket}}]}

    def write_conflist(self, conf_dir: Path) -> Path:
        conf_dir.mkdir(parents=True, exist_ok=True)
        path = conf_dir / KUBE_OVN_CONF
        path.write_text(json.dumps(self.conflist(), indent=1), encoding="utf-8")
        return path

    def calls(self, command: str | None = None, container: str | None = None,
              phase: str = "start") -> list[dict[str, Any]]:
        return matching(read_jsonl(self.record), phase=phase, command=command,
                        containerID=container)

    def holds(self, container: str, ifname: str = "eth0") -> bool:
        return (self.state / f"{container}:{ifname}").exists()

    def forget(self, container: str) -> None:
        for path in self.state.glob(f"{container}:*"):
            path.unlink()


class ApiServer(Protocol):
    """What the chains ask of an API server: kubeapi.py's KubeAPI, or a real one."""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def kubeconfig(self, path: Path) -> Path: ...
    def service_account(self, directory: Path) -> dict[str, str]: ...
    def put_pod(self, namespace: str, name: str, uid: str, node: str,
                annotations: dict[str, str] | None = None) -> None: ...
    def delete_pod(self, namespace: str, name: str) -> bool: ...


@dataclass
class _Base:
    """What both chains share: the API, the end delegate, pods."""

    enter: tuple[str, ...] = ()
    node: str = NODE
    cni_version: str = CNI_VERSION  # multus's conf takes kube-ovn's, so the runtime's conflist too
    api: ApiServer | None = None  # None: the chain starts kubeapi.py's and stops it
    kube_ovn: KubeOvn | None = None
    work: Path | None = None

    def _start_common(self, bin_dir: Path, work: Path) -> None:
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        self.kube_ovn = KubeOvn(work / "kube-ovn")
        self.kube_ovn.install(bin_dir)
        self.kube_ovn.write_conflist(work / "net.d")
        if self.api is None:
            self.api = KubeAPI(work / "api")
        self.api.start()

    @property
    def conflist_path(self) -> Path:
        assert self.work is not None
        return self.work / "net.d" / KUBE_OVN_CONF

    def pod_exists(self, pod: Pod, exists: bool) -> None:
        assert self.api is not None
        if exists:
            self.api.put_pod(pod.namespace, pod.name, pod.uid, self.node)
        else:
            self.api.delete_pod(pod.namespace, pod.name)

    def calls(self, command: str | None = None,
              container: str | None = None) -> list[dict[str, Any]]:
        assert self.kube_ovn is not None
        return self.kube_ovn.calls(command, container)

    def forget(self, container: str) -> None:
        assert self.kube_ovn is not None
        self.kube_ovn.forget(container)

    def _stop_common(self) -> None:
        if self.api is not None:
            self.api.stop()
            self.api = None


class Thin(Enum):
    INLINE = "inline"  # as the thin entrypoint writes it: kube-ovn's conflist in `delegates`
    CLUSTER_NETWORK_PATH = "clusterNetwork-path"  # `clusterNetwork`: the conflist's path


@dataclass
class MultusThin(_Base):
    """multus (thin plugin) run by the runtime, kube-ovn behind it."""

    form: Thin = Thin.INLINE
    delegate: str = ""  # the matrix's name: "multus-thin", or "multus-thin-path" for that form
    log: Path | None = None
    kubeconfig: Path | None = None

    def __post_init__(self) -> None:
        if not self.delegate:
            self.delegate = "multus-thin" if self.form is Thin.INLINE else "multus-thin-path"

    def start(self, bin_dir: Path, work: Path, cni_cache: Path) -> None:
        del cni_cache  # multus's cache is its default /var/lib/cni/multus, the node's
        (bin_dir / "multus").symlink_to(multus_bin("multus"))
        self._start_common(bin_dir, work)
        assert self.api is not None
        self.kubeconfig = self.api.kubeconfig(work / "multus.kubeconfig")
        self.log = work / "multus.log"
        # Made here: multus's logger (lumberjack) creates a missing log file with O_TRUNC, so
        # DELs run at once against a fresh node would truncate each other's first lines.
        self.log.touch()

    def plugins(self, behaviour: Behaviour) -> list[dict[str, Any]]:
        assert self.kube_ovn is not None and self.kubeconfig is not None
        self.kube_ovn.behave(behaviour)
        conf: dict[str, Any] = {"type": "multus", "logLevel": "debug", "logFile": str(self.log),
                                "logToStderr": False, "kubeconfig": str(self.kubeconfig)}
        if self.form is Thin.INLINE:
            conf["delegates"] = [self.kube_ovn.conflist()]
        else:
            conf["clusterNetwork"] = str(self.conflist_path)
        return [conf]

    def node_down(self) -> None:
        """multus thin runs only as the runtime's child: nothing of it outlives a DEL."""

    def node_up(self, enter: tuple[str, ...]) -> None:
        """Nothing to start: the runtime runs multus thin again for each command."""

    def stop(self) -> None:
        self._stop_common()


# The daemon's launcher, run inside the node: the service account files go under the node's /run
# (never the host's: it refuses to run in the mount namespace of the test that started it), then
# multus-daemon is exec'd in place, so the launcher's pid is the daemon's.
LAUNCHER = r"""
import os, shutil, sys
if os.readlink("/proc/self/ns/mnt") == sys.argv[1]:
    sys.exit("refusing to write %s in the test's own mount namespace" % sys.argv[3])
os.makedirs(sys.argv[3], exist_ok=True)
for name in ("token", "ca.crt", "namespace"):
    shutil.copy(os.path.join(sys.argv[2], name), os.path.join(sys.argv[3], name))
os.execv(sys.argv[4], sys.argv[4:])
"""


@dataclass
class MultusThick(_Base):
    """multus-shim run by the runtime, multus-daemon in the node, kube-ovn behind it."""

    delegate: str = "multus-thick"
    version: str = VERSION  # a row of peers/pins.tsv (the reported stack runs v4.2.3 too)
    # The node's /run as the host sees it, when the node has one of its own (tests/e2e_cri/node.py):
    # the daemon's socket is then where its DaemonSet puts it, /run/multus in the node, and goes
    # with the node's /run at a power-off. Without it the socket dir is in the work dir.
    run: Path | None = None
    daemon: Daemon | None = None  # while it runs
    starts: int = 0
    _process: Daemon | None = None

    @property
    def socket_dir(self) -> Path:
        """The daemon's socket dir as the host sees it."""
        if self.run is not None:
            return self.run / "multus"
        assert self.work is not None
        return self.work / "run-multus"

    @property
    def node_socket_dir(self) -> str:
        """The same as the daemon and the shim (both in the node) see it."""
        return NODE_SOCKET_DIR if self.run is not None else str(self.socket_dir)

    @property
    def conf_dir(self) -> Path:
        """Where the daemon writes the shim's 00-multus.conf (its cniConfigDir): the chain's own,
        never the runtime's conf dir, so a daemon restart cannot touch the conflist under test."""
        assert self.work is not None
        return self.work / "multus-conf"

    @property
    def log(self) -> Path:
        assert self.work is not None
        return self.work / "multus-daemon.log"

    def start(self, bin_dir: Path, work: Path, cni_cache: Path) -> None:
        del cni_cache  # the daemon's cniDir is its default /var/lib/cni/multus, the node's
        (bin_dir / "multus-shim").symlink_to(multus_bin("multus-shim", self.version))
        self._start_common(bin_dir, work)
        self.conf_dir.mkdir()
        config = {  # Cozystack's daemon-config.json, with this chain's paths
            "cniVersion": CNI_VERSION, "logLevel": "verbose", "logToStderr": False,
            "logFile": str(self.log), "cniConfigDir": str(self.conf_dir),
            "multusAutoconfigDir": str(self.conflist_path.parent), "multusConfigFile": "auto",
            "socketDir": self.node_socket_dir, "daemonSocketDir": self.node_socket_dir,
            "binDir": str(bin_dir),
        }
        (work / "daemon-config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
        self.start_daemon()

    def start_daemon(self) -> None:
        assert self.api is not None and self.work is not None and self.daemon is None
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
               "MULTUS_NODE_NAME": self.node}
        env |= self.api.service_account(self.work / "serviceaccount")
        self.starts += 1
        argv = [*self.enter, sys.executable, "-I", "-c", LAUNCHER,
                os.readlink("/proc/self/ns/mnt"), str(self.work / "serviceaccount"),
                SERVICE_ACCOUNT, str(multus_bin("multus-daemon", self.version)),
                "-config", str(self.work / "daemon-config.json")]
        if self._process is None:
            # The daemon writes the shim's conf once its socket serves and its informers have
            # synced (cmd/multus-daemon/main.go: server start, API readiness, then the config
            # manager); one killed with its node leaves its conf behind (it removes it only on a
            # clean exit): ready means written by this start.
            self._process = Daemon("multus-daemon", argv, self.work / "multus-daemon.out",
                                   ready=FileWritten(self.conf_dir / "00-multus.conf"),
                                   env=env, start_bound=90, more_logs=(self.log,))
        self._process.argv, self._process.env = argv, env
        self.daemon = self._process
        try:
            self._process.start()
        except BaseException:
            self.stop_daemon()
            raise

    def log_tail(self, lines: int = 30) -> str:
        return "" if self._process is None else self._process.log_tail(lines)

    def stop_daemon(self) -> None:
        """SIGTERM, as its pod's deletion does; the delegates it still runs (a kube-ovn told to
        hang) would outlive it: ended first."""
        if self.daemon is None:
            return
        self.daemon.end_children()
        self.daemon.stop()
        self.daemon = None

    def node_down(self) -> None:
        """The node killed the daemon with everything it ran (its socket dir went with the node's
        /run when `run` is given); reap it."""
        if self.daemon is None:
            return
        self.daemon.reap()
        self.daemon = None

    def node_up(self, enter: tuple[str, ...]) -> None:
        """The DaemonSet's pod back on the rebooted node: the daemon started in its new mount
        namespace, ready once it has written its conf again."""
        self.enter = enter
        self.start_daemon()

    def restart(self) -> None:
        """Stop and start the daemon (its informers list the API again when it comes back)."""
        self.stop_daemon()
        self.start_daemon()

    def plugins(self, behaviour: Behaviour) -> list[dict[str, Any]]:
        """The shim's entry: the conf the daemon wrote, less what the runtime's conflist gives."""
        assert self.kube_ovn is not None
        self.kube_ovn.behave(behaviour)
        conf = json.loads((self.conf_dir / "00-multus.conf").read_text(encoding="utf-8"))
        return [{k: v for k, v in conf.items() if k not in ("name", "cniVersion")}]

    def requests(self, command: str, container: str | None = None) -> int:
        """CNI requests the daemon received, of one command and optionally one container: its own
        log's 'DEL starting CNI request ContainerID:"..."' messages (pkg/server/server.go
        HandleCNIRequest). Counted in the whole text: multus writes a line's time, message and
        newline in three writes, which requests served at once interleave."""
        try:
            text = self.log.read_text(errors="replace")
        except FileNotFoundError:
            return 0
        wanted = f"{command} starting CNI request "
        if container is not None:
            wanted += f'ContainerID:"{container}" '
        return text.count(wanted)

    def stop(self) -> None:
        self.stop_daemon()
        self._stop_common()
