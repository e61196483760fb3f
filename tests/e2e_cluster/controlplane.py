"""The control plane of a one-node cluster: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler (peers/pins.tsv rows `etcd` and `control-plane`, built by tools/install-peers.sh),
run as processes inside the node's namespaces (node.py), as kubeadm's static pods run on a
one-node cluster's machine. Each component is one row of components() (its argv as kubeadm
writes it, less what a throwaway node does not need, and the API answer that says it is ready);
start() runs them in order as Daemons, each ready once its API answers.

The API server has the admission plugins of a default cluster (its built-in default set, which
includes PodSecurity with its default policy, privileged, and no exemptions) plus NodeRestriction,
as kubeadm enables it; authorization Node,RBAC; every client authenticates with a certificate of
pki.py. Everything listens inside the node's network namespace only.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e_cluster.node import Node
from tests.e2e_cluster.pki import Pki
from tests.e2e_kubelet.kubelet import VERSION, VERSIONS
from tests.support import peers
from tests.support.daemon import Answer, Daemon

K8S_VERSION = VERSION  # the control-plane row every scenario runs: a kubelet row's release
ETCD_VERSION = "v3.6.16"
API_PORT = 6443
SERVICE_RANGE = "10.96.0.0/16"
START_BOUND = 300  # seconds for the API server to be ready on a loaded 2-core machine

# GET a URL inside the node; a second argument "insecure": no verification (the controller
# manager's and scheduler's self-signed serving certificates, asked only for /healthz).
FETCH = r"""
import ssl, sys, urllib.request
context = ssl._create_unverified_context() if sys.argv[2:] == ["insecure"] else None
try:
    with urllib.request.urlopen(sys.argv[1], timeout=10, context=context) as r:
        sys.stdout.write(r.read().decode())
except OSError as e:
    sys.stderr.write(str(e)); sys.exit(3)
"""


def control_plane(version: str = K8S_VERSION) -> peers.Peer:
    """The control-plane row of a kubelet row's release (one for each of kubelet.VERSIONS)."""
    return peers.find("control-plane", version)


def etcd() -> peers.Peer:
    return peers.find("etcd", ETCD_VERSION)


def missing() -> str | None:
    for peer in (*(control_plane(v) for v in VERSIONS), etcd()):
        if not peer.built():
            return (f"{peer.name} {peer.version} is not built: run tools/install-peers.sh "
                    f"{peer.name}")
    return None


def kubectl_bin(version: str = K8S_VERSION) -> Path:
    return control_plane(version).bin("kubectl")


@dataclass
class ControlPlane:
    node: Node
    pki: Pki
    daemons: dict[str, Daemon] = field(default_factory=dict)  # while they run
    starts: int = 0
    version: str = K8S_VERSION  # its control-plane row

    @property
    def home(self) -> Path:
        return self.node.tmp / "control-plane"

    @property
    def server(self) -> str:
        return f"https://{self.node.ip}:{API_PORT}"

    def kubeconfig(self, user: str) -> Path:
        return self.home / f"{user}.kubeconfig"

    def log_path(self, name: str) -> Path:
        return self.node.tmp / "logs" / f"{name}.log"

    # --- the components, in start order ------------------------------------------------------

    def etcd_argv(self) -> list[str]:
        url = "http://127.0.0.1:2379"
        return [str(etcd().bin("server")), "--name=node", f"--data-dir={self.home / 'etcd'}",
                f"--listen-client-urls={url}", f"--advertise-client-urls={url}",
                "--listen-peer-urls=http://127.0.0.1:2380",
                "--initial-advertise-peer-urls=http://127.0.0.1:2380",
                "--initial-cluster=node=http://127.0.0.1:2380",
                "--listen-metrics-urls=http://127.0.0.1:2381",
                # A throwaway node's data: a machine's fsync under the other helpers' builds
                # would time etcd's heartbeats out, and nothing here outlives the test.
                "--unsafe-no-fsync", "--log-level=warn"]

    def apiserver_argv(self) -> list[str]:
        p = self.pki
        return [str(control_plane(self.version).bin("kube-apiserver")),
                f"--advertise-address={self.node.ip}", "--bind-address=0.0.0.0",
                f"--secure-port={API_PORT}", "--etcd-servers=http://127.0.0.1:2379",
                f"--client-ca-file={p.ca}", f"--tls-cert-file={p.crt('apiserver')}",
                f"--tls-private-key-file={p.key('apiserver')}",
                f"--kubelet-client-certificate={p.crt('apiserver-kubelet-client')}",
                f"--kubelet-client-key={p.key('apiserver-kubelet-client')}",
                "--kubelet-preferred-address-types=InternalIP",
                "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
                "--allow-privileged=true", f"--service-cluster-ip-range={SERVICE_RANGE}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={p.sa_pub}",
                f"--service-account-signing-key-file={p.sa_key}",
                f"--cert-dir={self.home / 'apiserver-certs'}", "--profiling=false"]

    def controller_manager_argv(self) -> list[str]:
        kubeconfig = self.kubeconfig("controller-manager")
        return [str(control_plane(self.version).bin("kube-controller-manager")),
                f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}", "--bind-address=127.0.0.1",
                "--leader-elect=false", "--use-service-account-credentials=true",
                f"--service-account-private-key-file={self.pki.sa_key}",
                f"--root-ca-file={self.pki.ca}", "--profiling=false"]

    def scheduler_argv(self) -> list[str]:
        kubeconfig = self.kubeconfig("scheduler")
        return [str(control_plane(self.version).bin("kube-scheduler")),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}", "--bind-address=127.0.0.1",
                "--leader-elect=false", "--profiling=false"]

    def components(self) -> list[tuple[str, Callable[[], list[str]], Callable[[], bool]]]:
        """(name, argv, ready) in start order."""
        return [("etcd", self.etcd_argv, lambda: self._fetch("http://127.0.0.1:2379/health")),
                ("kube-apiserver", self.apiserver_argv, self.api_ready),
                ("kube-controller-manager", self.controller_manager_argv,
                 lambda: self._fetch("https://127.0.0.1:10257/healthz", insecure=True)),
                ("kube-scheduler", self.scheduler_argv,
                 lambda: self._fetch("https://127.0.0.1:10259/healthz", insecure=True))]

    # --- life --------------------------------------------------------------------------------

    def prepare(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        for user in ("admin", "controller-manager", "scheduler", "kubelet"):
            self.pki.kubeconfig(self.kubeconfig(user), user, self.server)

    def start(self) -> None:
        """Each component in the node (its enter prefix is the holder's of this boot), the next
        once it answers."""
        for name, argv, ready in self.components():
            daemon = Daemon(name, [*self.node.enter_all, *argv()], self.log_path(name),
                            ready=Answer(ready, "its API to answer"),
                            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(self.home)},
                            start_bound=START_BOUND, check_every=1, starts=self.starts)
            self.daemons[name] = daemon
            daemon.start()
        self.starts += 1

    def api_ready(self) -> bool:
        out = subprocess.run([*self.node.netns(), str(kubectl_bin(self.version)),
                              f"--kubeconfig={self.kubeconfig('admin')}", "get", "--raw",
                              "/readyz"], capture_output=True, text=True, timeout=60,
                             check=False)
        return out.returncode == 0 and out.stdout.strip() == "ok"

    def _fetch(self, url: str, insecure: bool = False) -> bool:
        extra = ["insecure"] if insecure else []
        out = subprocess.run([*self.node.netns(), sys.executable, "-I", "-c", FETCH, url, *extra],
                             capture_output=True, text=True, timeout=60, check=False)
        return out.returncode == 0

    def stop(self) -> None:
        """Every component stopped with grace, the last started first (teardown)."""
        for daemon in reversed(self.daemons.values()):
            daemon.stop()
        self.daemons.clear()

    def kill(self) -> None:
        """SIGKILL every component, as a power cut would."""
        for daemon in self.daemons.values():
            daemon.kill()
        self.daemons.clear()

    def reap(self) -> None:
        """Wait for components that were killed with the node's processes."""
        for daemon in self.daemons.values():
            daemon.reap(timeout=60)
        self.daemons.clear()
