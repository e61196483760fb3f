"""The control plane of a one-node cluster: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler (peers/pins.tsv rows `etcd` and `control-plane`, built by tools/install-peers.sh),
run as processes inside the node's namespaces (node.py), as kubeadm's static pods run on a
one-node cluster's machine. Each component is one row of COMPONENTS (its argv as kubeadm writes
it, less what a throwaway node does not need); start() runs them in order, each waited for.

The API server has the admission plugins of a default cluster (its built-in default set, which
includes PodSecurity with its default policy, privileged, and no exemptions) plus NodeRestriction,
as kubeadm enables it; authorization Node,RBAC; every client authenticates with a certificate of
pki.py. Everything listens inside the node's network namespace only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tests.e2e_cluster.node import Node
from tests.e2e_cluster.pki import Pki
from tests.e2e_kubelet.kubelet import VERSION, VERSIONS
from tests.support import peers
from tests.support.waiting import wait_for

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
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[str, IO[bytes]] = field(default_factory=dict)
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
        self.starts += 1
        for name, argv, ready in self.components():
            log = self.log_path(name).open("ab")
            log.write(f"\n===== start {self.starts} =====\n".encode())
            log.flush()
            self.logs[name] = log
            self.procs[name] = subprocess.Popen(
                [*self.node.nsenter(), *argv()], stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(self.home)})
            wait_for(lambda n=name, r=ready: self._up(n, r), f"{name} to be ready",  # type: ignore[misc]
                     timeout=START_BOUND, every=1, detail=lambda n=name: self.log_tail(n))  # type: ignore[misc]

    def _up(self, name: str, ready: Callable[[], bool]) -> bool:
        proc = self.procs[name]
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")
        return ready()

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

    def kill(self) -> None:
        """SIGKILL every component (a power cut; teardown)."""
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        self.reap()

    def reap(self) -> None:
        """Wait for components that were killed (by kill(), or with the node's processes)."""
        for proc in self.procs.values():
            proc.wait(timeout=60)
        self.procs.clear()
        for log in self.logs.values():
            log.close()
        self.logs.clear()

    def log_tail(self, name: str, lines: int = 30) -> str:
        try:
            text = self.log_path(name).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])
