"""One node of the kubelet suite, set up and torn down: a runtime row, the delegate chain in its
conflist (with or without the guard in front), and a standalone kubelet driving it.

The chain is "fake-stateful" (tests/support/chains.py): tests/fakes/stale_delegate.py where
multus would be, failing DEL for an attachment it holds no state for (the seed report's failure,
which real multus v4.3.0 never shows: README "Behind multus"), with Debian's bridge + host-local
after it so a pod that starts has an eth0 (containerd requires one). It is the one piece of the
conflist a scenario changes.

What the scenarios read, besides the kubelet (kubelet.py): the runtime's sandboxes over CRI,
what the fake was asked (its record file), and the runtime's log.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from tests.e2e_cri import cri, pause_image
from tests.e2e_cri.scenario import FakeDelegate, Network, bridge_conf
from tests.e2e_kubelet.installer_pod import ImageArchive
from tests.e2e_kubelet.kubelet import NAMESPACE, VERSION, Kubelet, is_ready, plain_pod
from tests.e2e_kubelet.node import Node
from tests.e2e_kubelet.runtimes import Runtime
from tests.support import skips
from tests.support.fakes import install_fake
from tests.support.waiting import wait_for

DELEGATE = "fake-stateful"  # the matrix's name for the chain
READY_BOUND = 300  # seconds from a manifest to its pod Ready: a sandbox, a container, load


@dataclass(frozen=True)
class Shared:
    """What every node of a run uses and is made once: the CRI stubs, the pause image, the
    installer image (built on first use)."""

    stubs: cri.Stubs
    pause_archive: Path
    installer_image: ImageArchive


@dataclass
class Site:
    runtime: Runtime
    node: Node
    kubelet: Kubelet
    cri: cri.CriClient
    net: Network
    fake: FakeDelegate
    shared: Shared

    # --- the chain ---------------------------------------------------------------------------

    def chain(self, **knobs: Any) -> list[dict[str, Any]]:
        """The conflist's plugins: the fake (with these knobs), then bridge + host-local."""
        return [self.fake.conf(**knobs), bridge_conf(self.node)]

    # --- pods --------------------------------------------------------------------------------

    def start_pod(self, name: str) -> None:
        self.kubelet.put(name, plain_pod(name, pause_image.IMAGE_REF))

    def wait_ready(self, *names: str) -> None:
        wait_for(lambda: all(is_ready(self.kubelet.pod(n)) for n in names),
                 f"pods {', '.join(names)} Ready", timeout=READY_BOUND, every=1,
                 detail=self.kubelet.log_tail)

    def sandboxes(self, name: str) -> list[Any]:
        """The runtime's sandboxes of the static pod from manifest `name`, oldest first."""
        full = f"{name}-{self.kubelet.node_name}"
        found = [s for s in self.cri.list_pods()
                 if s.metadata.name == full and s.metadata.namespace == NAMESPACE]
        return sorted(found, key=lambda s: s.created_at)

    def sandbox_ids(self) -> set[str]:
        return {s.id for s in self.cri.list_pods()}

    def state(self, sandbox: Any) -> str:
        return self.cri.state_name(sandbox.state)

    def containerd_lines(self, *needles: str) -> list[str]:
        text = self.node.log_path.read_text(encoding="utf-8", errors="replace")
        return [line for line in text.splitlines() if all(n in line for n in needles)]

    # --- restarts ----------------------------------------------------------------------------

    def boot(self) -> None:
        """The node's processes after a power-off: namespaces, the runtime (which reloads the
        conflist on disk), then the kubelet."""
        self.node.start_holder()
        self.node.start_runtime()
        self.cri.reconnect()
        self.net.wait_loaded(self.cri)
        self.kubelet.start()


@contextlib.contextmanager
def site(runtime: Runtime, guarded: bool, shared: Shared,
         kubernetes: str = VERSION) -> Iterator[Site]:
    """A node with the runtime running the pause image, the chain in its conflist (behind the
    guard or not) and the kubelet of release `kubernetes` up; everything torn down afterwards,
    also on failure."""
    node = Node.create_for(runtime)
    kubelet = Kubelet(node, version=kubernetes)
    client: cri.CriClient | None = None
    try:
        node.install_debian_plugins()
        install_fake(node.cni_bin)
        node.come_up(shared.pause_archive)
        client = cri.CriClient(node.socket, shared.stubs, node.cgroup_parent)
        wait_for(lambda: client is not None and client.image_known(pause_image.IMAGE_REF),
                 "CRI to see the pause image")
        net = Network(node, guarded)
        here = Site(runtime, node, kubelet, client, net, FakeDelegate(node), shared)
        net.apply(client, here.chain())
        kubelet.start()
        yield here
    finally:
        kubelet.kill()
        if client is not None:
            client.close()
        problems = node.teardown()
        assert not problems, f"node teardown left things behind: {problems}"


def skip_or_fail(why: str) -> NoReturn:
    skips.skip_or_fail(why, "kubelet suite")


def elapsed(since: float) -> float:
    return round(time.monotonic() - since, 1)
