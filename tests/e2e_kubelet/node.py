"""A throwaway node for the kubelet suite: a runtime row (runtimes.py) and a kubelet, in namespaces
of their own, everything under one /tmp/dgkl-* dir.

tests/e2e_cri/node.py's Node (itself tests/support/node.py's), configured with what a kubelet
adds:

- The holder owns a private mount namespace AND a network namespace of the node's own (lo up).
  containerd, its shims and pods, the CNI bridge and the kubelet all live in it, so the kubelet's
  read-only port (the one way to read a standalone kubelet's pod status) listens on 127.0.0.1 of
  the node, not of the machine, and nothing a pod's network makes reaches the host's.
- Inside the mount namespace, the node's own dirs are bound where a kubeadm node has them:
  /etc/cni/net.d, /opt/cni/bin, /var/lib/cni, /var/log (the pods' logs, the kubelet's
  /var/log/containers links, the guard's default log) and /var/lib/kubelet (the kubelet 1.35
  keeps its device-plugin socket at the compiled-in /var/lib/kubelet/device-plugins whatever its
  root dir), and the node's containerd config at /etc/containerd/config.toml (where the installer
  reads the runtime's CNI dirs). A mount point the host lacks (/opt/cni on a fresh machine) is
  made in an overlay of its nearest parent that the node's namespace alone sees: the host's dirs
  are never written.
- The six kernel settings the kubelet checks at start (vm.overcommit_memory, vm.panic_on_oom,
  kernel.panic, kernel.panic_on_oops, kernel.keys.root_max{keys,bytes}) are files of the node
  bound over /proc/sys, holding the values the kubelet wants: with protectKernelDefaults it
  only reads them. Without this it would write the machine's own sysctls (kernel.panic_on_oops=1
  among them; pkg/kubelet/cm/container_manager_linux.go setupKernelTunables).
- power_off(): every process of the node (runtime, shims, kubelet) SIGKILLed at once, the holder
  (and so every mount: netns, rootfs, /run) gone, /run emptied, the cgroups removed; the disk
  (containerd's root, /var/lib/cni, the kubelet's dir, the manifests) kept.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar, Self

from tests.e2e_cri import node as base
from tests.e2e_cri.runtimes import Paths, Runtime
from tests.e2e_kubelet.runtimes import CNI_BIN, CNI_CONF
from tests.support import holder as holders

# Where the node's runtime config is, as on a node with containerd's defaults: the installer reads
# the CNI dirs from it (cni_delguard/host/runtimeconf.py). CRI-O is no row of this suite.
RUNTIME_CONFIG = "/etc/containerd/config.toml"

# The kernel settings setupKernelTunables checks, with the values it wants (the kubelet's
# component-helpers sysctl constants): files of the node bound over /proc/sys.
KERNEL_TUNABLES = {
    "vm/overcommit_memory": "1",
    "vm/panic_on_oom": "0",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
    "kernel/keys/root_maxkeys": "1000000",
    "kernel/keys/root_maxbytes": "25000000",
}


@dataclass
class Node(base.Node):
    prefix: ClassVar[str] = "dgkl-"  # of the node's temp dir and name (a suite's own)
    dirs: ClassVar[tuple[str, ...]] = ("cni/bin", "cni/net.d", "opt", "runc", "logs")
    own: ClassVar[tuple[tuple[str, str], ...]] = (
        ("run", "/run"), ("var-lib-cni", "/var/lib/cni"), ("cni/net.d", CNI_CONF),
        ("cni/bin", CNI_BIN), ("var-log", "/var/log"), ("var-lib-kubelet", "/var/lib/kubelet"),
        # The DaemonSet mounts CRI-O's config dir too (DirectoryOrCreate: a containerd node gets
        # an empty one): the node's own, so the kubelet never makes the host's.
        ("etc-crio", "/etc/crio"))
    volatile: ClassVar[tuple[str, ...]] = ("run",)
    sysctls: ClassVar[dict[str, str]] = KERNEL_TUNABLES
    net: ClassVar[bool] = True
    start_bound: ClassVar[float] = 120  # a runtime's start under the other helpers' load

    @classmethod
    def create_for(cls, runtime: Runtime) -> Self:
        node = cls.make(runtime=runtime)
        # Bound over the node's /etc/containerd/config.toml before the runtime writes it (in
        # place: the bind keeps its inode), so that the installer, which reads the runtime's
        # own config for the CNI dirs, reads this node's runtime and not the machine's package
        # default (Debian's names /usr/lib/cni).
        (node.tmp / "runtime.conf").touch()
        return node

    def binds(self) -> list[tuple[Path, str]]:
        pairs = super().binds()
        return [*pairs[:len(self.own)], (self.tmp / "runtime.conf", RUNTIME_CONFIG),
                *pairs[len(self.own):]]

    @property
    def enter(self) -> tuple[str, ...]:
        """Its mount namespace only: the reported stack's daemons (tests/support/reported_stack.py)
        run there and still reach the test's API server on the machine's loopback. The runtime,
        the kubelet and what asks them run in every namespace of the node (enter_all)."""
        assert self.holder is not None
        return holders.enter(self.holder)

    def paths(self) -> Paths:
        """The runtime's config names the CNI dirs where a kubeadm node has them: inside the
        node's mount namespace they are the node's own dirs (binds())."""
        return replace(super().paths(), cni_bin=Path(CNI_BIN), cni_conf=Path(CNI_CONF))

    @property
    def var_log(self) -> Path:
        """What /var/log is inside the node (the guard's default log is under it)."""
        return self.tmp / "var-log"

    def power_off(self) -> None:
        """What a hard reset leaves: every process of the node (runtime, shims, kubelet)
        SIGKILLed at once, not the runtime first; then the rest as any node's power-off."""
        self._kill_leftovers()
        if self.daemon is not None:
            self.daemon.reap()
            self.daemon = None
        super().power_off()

    def _remove_bridges(self) -> None:
        """Nothing to do: the node's bridge lived in its own network namespace, gone with it."""
