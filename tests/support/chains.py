"""A delegate chain: what sits behind the guard (where multus is on a node), as scenarios use it.

The end-to-end scenarios (CRI calls written by the test, or a real kubelet) run on several
runtimes and with several chains; the matrix's `delegate` names the chain:

- "fake-stateful": tests/fakes/stale_delegate.py straight behind the guard. It fails DEL for an
  attachment it holds no state for: the seed report's failure, which real multus never shows.
- "multus-thin": the real multus (thin plugin) in front of a kube-ovn-like delegate, with a small
  Kubernetes API for the pods and network-attachment-definitions multus reads
  (tests/support/multus.py MultusThin with `form` Thin.INLINE: the delegates inline, as multus's
  entrypoint writes them).
- "multus-thin-path": the same with `form` Thin.CLUSTER_NETWORK_PATH (`clusterNetwork` as the
  conflist's path, the other form multus documents).
  Whatever fails, fails because of what multus hands the delegate, never because of a flag in a
  fake. (multus v4.3.0 never fails a DEL
  for want of its cache: tests/support/multus.py's header and tests/multus_chain say what it does.)
- "multus-thick": the real multus-shim and multus-daemon, with the same delegate and API
  (MultusThick; the daemon runs in the node's mount namespace: give it the node's nsenter prefix
  as `enter`, and the node's /run as `run` for its socket dir).

A node's reboot (tests/e2e_cri/node.py power_off/boot) reaches the chain through node_down and
node_up: a chain that runs a daemon in the node (multus thick's, a DaemonSet pod on a real node)
loses it with the node and starts it again once the node's runtime is back; the others do
nothing.

A scenario asks for a behaviour of the END delegate (the kube-ovn-like one) through Behaviour;
the chain turns it into its own configs. Everything a chain starts or writes lives under the
work dir it is given, inside the node's mount namespace where the runtime's CNI cache is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class Behaviour:
    """What the end delegate does; the default is a healthy delegate."""

    hang: tuple[str, ...] = ()  # commands that sleep instead of answering, e.g. ("ADD",)
    hang_seconds: int = 3600
    fail_add: int | None = None  # the CNI error code its ADD returns
    fail_del: int | None = None  # the code its DEL returns even when it holds state


@dataclass(frozen=True)
class Pod:
    """A pod as the API (and the runtime's CNI_ARGS) name it."""

    namespace: str
    name: str
    uid: str


class Chain(Protocol):
    delegate: str  # the matrix's name for it
    # the conflist's cniVersion in front of it: multus's conf takes its delegate's (kube-ovn's
    # 0.3.1), as multus's entrypoint and daemon write it
    cni_version: str

    def start(self, bin_dir: Path, work: Path, cni_cache: Path) -> None:
        """Put the chain's plugins into bin_dir and start what it needs (an API, a daemon).

        cni_cache is the host path that is /var/lib/cni inside the node's mount namespace
        (libcni's result cache and multus's own cache are under it)."""

    def plugins(self, behaviour: Behaviour) -> list[dict[str, Any]]:
        """The conflist's plugins for this behaviour; the first is the one the guard wraps."""

    def pod_exists(self, pod: Pod, exists: bool) -> None:
        """Create or delete the pod in the chain's API (a chain without one ignores it)."""

    def calls(
        self, command: str | None = None, container: str | None = None
    ) -> list[dict[str, Any]]:
        """What the end delegate was asked to do, in order (its own record)."""

    def forget(self, container: str) -> None:
        """Drop the end delegate's state for container, as a delegate that lost it would."""

    def node_down(self) -> None:
        """The node lost power: what the chain ran inside it is gone (the node killed it, and its
        /run with it); forget it. A chain that runs nothing in the node does nothing."""

    def node_up(self, enter: tuple[str, ...]) -> None:
        """The node is up again and its runtime answers: start what runs on it as a pod of its
        own (a DaemonSet's), in its new mount namespace (enter: the argv prefix that enters it).
        A chain that runs nothing in the node does nothing."""

    def stop(self) -> None:
        """Stop what start() started and remove what it made; safe to call twice."""
