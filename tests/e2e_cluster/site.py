"""One cluster of the suite, set up and torn down: a node (node.py) with its control plane
(controlplane.py), a runtime row, the delegate chain in its conflist, and the kubelet registered
to the API server; the clients (kube.py) a user would run.

The chain is the kubelet suite's "fake-stateful" (tests/e2e_kubelet/site.py says why): the
stateful fake where multus would be, then Debian's bridge + host-local. The guard is never
written into the conflist by the test here: a scenario with the guard installs it the way users
do, with the chart (or kustomize), and the installer pod wraps the conf (`--wrap
stale-delegate`, as the chart's values document for a delegate other than multus).

Images on the node: the pause image (also the sandbox image) and the CSI image (workloads.py),
imported into the node's containerd under the name a manifest gives it (imagePullPolicy Never or
IfNotPresent: never pulled); the installer image the way users get it, pulled by its digest from
the cluster's registry, where publish.py pushed the release (tools/release.sh) and verified it.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from tests.e2e_cluster import controlplane, publish, workloads
from tests.e2e_cluster.controlplane import K8S_VERSION, ControlPlane
from tests.e2e_cluster.kube import ClusterHelm, Kube
from tests.e2e_cluster.kubelet import Kubelet
from tests.e2e_cluster.node import Node
from tests.e2e_cluster.pki import Pki
from tests.e2e_cri import cri, pause_image
from tests.e2e_cri.runtimes import Runtime
from tests.e2e_cri.scenario import FakeDelegate, Network, bridge_conf
from tests.e2e_kubelet.installer_pod import BUILD_TAG
from tests.support import cosign, skips
from tests.support.fakes import install_fake
from tests.support.guard import HOST_ARCH
from tests.support.waiting import wait_for

# inotify instances one cluster holds once it runs, measured on a running one: the kubelet 7
# (cAdvisor, its config and plugin watchers), the API server 3, containerd 2, the controller
# manager 1; the scheduler and etcd none. Every root process of the machine shares one limit,
# fs.inotify.max_user_instances (128 by default): a kubelet that finds none left exits at start
# ("Failed to start cAdvisor" err="inotify_init: too many open files"), seen with the kubelet
# suite's 14 nodes running beside this one on a shared machine. A cluster starts only when the
# instances it needs are free (room()), so a full machine makes it wait, never fail.
INOTIFY_NEED = 16
INOTIFY_LIMIT = Path("/proc/sys/fs/inotify/max_user_instances")
ROOM_BOUND = 1800  # seconds a cluster may wait for the machine's other kubelets to end
DELEGATE = "fake-stateful"
CONFLIST = "/etc/cni/net.d/10-e2e.conflist"
READY_BOUND = 600  # seconds for pods to be Ready: sandboxes, the scheduler, load


@dataclass(frozen=True)
class Release:
    """One version of the guard as users get it: tools/release.sh's dir (the image as an OCI
    archive, the chart naming it by digest, SHA256SUMS, the signatures, cosign.pub), signed with
    the suite's key (`signer`), published to each cluster's registry (publish.py)."""

    version: str
    dir: Path
    signer: cosign.Cosign

    @property
    def chart(self) -> Path:
        return self.dir / f"cni-delguard-{self.version}.tgz"

    @property
    def digest(self) -> str:
        return (self.dir / f"cni-delguard-{self.version}-image.digest").read_text().strip()

    @property
    def image(self) -> str:
        """What the chart names by default and the node pulls: the registry's, by digest."""
        return f"{publish.IMAGE}@{self.digest}"


@dataclass(frozen=True)
class Shared:
    """What every cluster of a run uses, made once."""

    stubs: cri.Stubs
    pause_archive: Path
    csi_archive: Path
    releases: Callable[[], tuple[Release, Release]]  # built on first use (minutes)


@dataclass
class Cluster:
    runtime: Runtime
    node: Node
    plane: ControlPlane
    kubelet: Kubelet
    cri: cri.CriClient
    net: Network
    fake: FakeDelegate
    shared: Shared
    kube: Kube
    helm: ClusterHelm
    notes: dict[str, Any] = field(default_factory=dict)
    closing: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    published: dict[str, dict[str, Any]] = field(default_factory=dict)

    # --- the chain ---------------------------------------------------------------------------

    def chain(self, **knobs: Any) -> list[dict[str, Any]]:
        return [self.fake.conf(**knobs), bridge_conf(self.node)]

    @property
    def conflist(self) -> Path:
        return self.node.path(CONFLIST)

    def wrapped(self) -> bool:
        try:
            conf = json.loads(self.conflist.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return any(p.get("type") == "cni-delguard" for p in conf.get("plugins", []))

    # --- images ------------------------------------------------------------------------------

    def publish(self, release: Release) -> dict[str, Any]:
        """The release pushed to this cluster's registry (started on first use) and verified as
        a user verifies it before `helm install oci://...`: what each check said."""
        if not self.published:
            publish.start_registry(self, self.closing)
        if release.version not in self.published:
            publish.push(self, release)
            self.published[release.version] = publish.verify(self, release)
        return self.published[release.version]

    # --- pods --------------------------------------------------------------------------------

    def pods(self, namespace: str = workloads.APP_NAMESPACE,
             selector: str | None = None) -> list[dict[str, Any]]:
        args = ["pods", "-n", namespace] + (["-l", selector] if selector else [])
        return self.kube.items(*args)

    def wait_pods_ready(self, count: int, selector: str | None = None,
                        namespace: str = workloads.APP_NAMESPACE,
                        timeout: float = READY_BOUND) -> list[dict[str, Any]]:
        def ready() -> list[dict[str, Any]] | None:
            found = [p for p in self.pods(namespace, selector)
                     if not p["metadata"].get("deletionTimestamp")]
            good = [p for p in found if workloads.is_ready(p)]
            return good if len(good) == count and len(found) == count else None

        return wait_for(ready, f"{count} pods {selector or ''} in {namespace} Ready",
                        timeout=timeout, every=2, detail=self.kubelet.log_tail)

    def sandbox_ids(self) -> set[str]:
        return {s.id for s in self.cri.list_pods()}

    def sandboxes_of(self, namespace: str) -> list[Any]:
        return [s for s in self.cri.list_pods() if s.metadata.namespace == namespace]

    def containerd_lines(self, *needles: str) -> list[str]:
        text = self.node.log_path.read_text(encoding="utf-8", errors="replace")
        return [line for line in text.splitlines() if all(n in line for n in needles)]

    # --- power -------------------------------------------------------------------------------

    def power_off(self) -> None:
        """Every process of the node SIGKILLed at once, the control plane's with them."""
        self.node.power_off()
        self.kubelet.reap()
        self.plane.reap()

    def boot(self) -> None:
        """As the machine starts its services: namespaces, the control plane, the runtime
        (which reloads the conflist on disk), the kubelet."""
        with room():
            self.node.start_holder()
            self.plane.start()
            self.node.start_runtime()
            self.cri.reconnect()
            self.kubelet.start()


@contextlib.contextmanager
def cluster(runtime: Runtime, shared: Shared, hang: bool = False,
            healthy: bool = False, kubernetes: str = K8S_VERSION) -> Iterator[Cluster]:
    """A one-node cluster with the chain in the conflist and the node Ready; with `hang`, every
    ADD of the delegate hangs while hang_file() exists; `healthy`: Debian's bridge alone, no
    stateful fake (a node whose plugins have no fault); `kubernetes`: the release of its control
    plane, kubelet and kubectl. Everything torn down afterwards, also on failure."""
    node = Node.create_for(runtime)
    pki = Pki.make(node.tmp / "pki", node.name, node.ip)
    plane = ControlPlane(node, pki, version=kubernetes)
    plane.prepare()
    kubelet = Kubelet(node, version=kubernetes, kubeconfig=plane.kubeconfig("kubelet"),
                      client_ca=pki.ca)
    client: cri.CriClient | None = None
    here: Cluster | None = None
    try:
        node.install_debian_plugins()
        install_fake(node.cni_bin)
        with room():
            node.start_holder()
            plane.start()
            node.start_runtime_on_a_working_snapshotter()
        for archive in (shared.pause_archive, shared.csi_archive):
            node.import_image(archive)
        client = cri.CriClient(node.socket, shared.stubs, node.cgroup_parent)
        wait_for(lambda: client is not None and client.image_known(pause_image.IMAGE_REF),
                 "CRI to see the pause image")
        net = Network(node, guarded=False)
        here = Cluster(runtime, node, plane, kubelet, client, net, FakeDelegate(node), shared,
                       Kube(node, plane.kubeconfig("admin"), kubernetes),
                       ClusterHelm(node, plane.kubeconfig("admin"), node.tmp / "helm"))
        knobs: dict[str, Any] = {}
        if hang:
            hang_file(node).touch()
            knobs = {"hang": ["ADD"], "hangWhile": str(hang_file(node))}
        net.apply(client, here.chain(**knobs)[1:] if healthy else here.chain(**knobs))
        with room():
            kubelet.start()
        wait_node_ready(here)
        here.kube.apply(workloads.namespace(workloads.APP_NAMESPACE))
        yield here
    finally:
        if here is not None:
            here.closing.close()
        kubelet.stop()
        plane.stop()
        if client is not None:
            client.close()
        problems = node.teardown()
        assert not problems, f"node teardown left things behind: {problems}"


def inotify_in_use() -> int:
    """inotify instances open on the machine (every process's; all are root's here)."""
    count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.scandir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    count += os.readlink(fd.path) == "anon_inode:inotify"
    return count


class _Room:
    """The clusters of this run between room() and their processes' start, whose instances
    /proc does not show yet."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.starting = 0

    def take(self) -> bool:
        with self.lock:
            left = int(INOTIFY_LIMIT.read_text()) - inotify_in_use()
            if left - self.starting * INOTIFY_NEED < INOTIFY_NEED:
                return False
            self.starting += 1
            return True

    def give(self) -> None:
        with self.lock:
            self.starting -= 1


_ROOM = _Room()


@contextlib.contextmanager
def room() -> Iterator[None]:
    """Start a cluster's processes once the machine has the inotify instances they need."""
    wait_for(_ROOM.take, f"{INOTIFY_NEED} free inotify instances "
             "(fs.inotify.max_user_instances)", timeout=ROOM_BOUND, every=5)
    try:
        yield
    finally:
        _ROOM.give()


def hang_file(node: Node) -> Path:
    """While it exists, the delegate's ADDs hang (the stateful fake's hangWhile)."""
    return node.tmp / "delegate-hangs"


def wait_node_ready(here: Cluster) -> None:
    def ready() -> bool:
        nodes = here.kube.items("nodes")
        return any(n["metadata"]["name"] == here.node.name and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in n.get("status", {}).get("conditions", [])) for n in nodes)

    wait_for(ready, f"node {here.node.name} Ready", timeout=READY_BOUND, every=2,
             detail=here.kubelet.log_tail)


def installer_name() -> str:
    return f"{BUILD_TAG}-{HOST_ARCH}"


def skip_or_fail(why: str) -> NoReturn:
    skips.skip_or_fail(why, "cluster suite")


def elapsed(since: float) -> float:
    return round(time.monotonic() - since, 1)


def why_not_built() -> str | None:
    return controlplane.missing()
