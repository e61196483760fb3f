"""A throwaway node for the kubelet suite: a runtime row (runtimes.py) and a kubelet, in namespaces
of their own, everything under one /tmp/dgkl-* dir.

tests/e2e_cri/node.py's Node, with what a kubelet adds:

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
- reboot(): every process of the node SIGKILLed, the holder (and so every mount: netns, rootfs,
  /run) gone, /run emptied, the cgroups removed; the disk (containerd's root, /var/lib/cni, the
  kubelet's dir, the manifests) kept; then a new holder and the runtime started again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Self

from tests.e2e_cri import node as base
from tests.e2e_cri.runtimes import Paths, Runtime
from tests.e2e_kubelet.runtimes import CNI_BIN, CNI_CONF
from tests.support.waiting import wait_for

PREFIX = "dgkl-"
# Where the node's runtime config is, as on a node with containerd's defaults: the installer reads
# the CNI dirs from it (cni_delguard/node/runtimeconf.py). CRI-O is no row of this suite.
RUNTIME_CONFIG = "/etc/containerd/config.toml"
START_BOUND = 120  # seconds a runtime may take to answer after start, under the other helpers' load

# Run by the holder inside its new namespaces: lo up, the binds (each mount point made in an
# overlay of its nearest existing parent when the host lacks it), then wait for stdin to close.
HOLDER = r"""
import os, subprocess, sys
def run(*argv):
    subprocess.run(argv, check=True, capture_output=True)
run("ip", "link", "set", "lo", "up")
overlays, pairs = sys.argv[1], list(zip(sys.argv[2::2], sys.argv[3::2]))
# First the mount points the host lacks, each in an overlay of its nearest existing parent (an
# overlay that would cover an earlier one's is not needed: that one is writable already) ...
missing = [dst for _, dst in pairs if not os.path.exists(dst)]
parents = set()
for dst in missing:
    parent = os.path.dirname(dst)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    parents.add(parent)
done = []
for i, parent in enumerate(sorted(parents, key=len)):
    if parent == "/":
        raise SystemExit("no parent to overlay below /")
    if any(parent.startswith(d + "/") for d in done):
        continue
    up, work = f"{overlays}/{i}/up", f"{overlays}/{i}/work"
    os.makedirs(up), os.makedirs(work)
    run("mount", "-t", "overlay", "overlay", "-o",
        f"lowerdir={parent},upperdir={up},workdir={work}", parent)
    done.append(parent)
for src, dst in pairs:
    if dst in missing:
        if os.path.isdir(src):
            os.makedirs(dst)
        else:
            open(dst, "x").close()
# ... then every bind, over them.
for src, dst in pairs:
    run("mount", "--bind", src, dst)
print("ready", flush=True)
sys.stdin.read()
"""

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
    holder_starts: int = 0
    prefix: ClassVar[str] = PREFIX  # of the node's temp dir and name (a suite's own)

    @classmethod
    def create_for(cls, runtime: Runtime) -> Self:
        # Short path: unix socket paths are limited to 108 bytes.
        tmp = Path(tempfile.mkdtemp(prefix=cls.prefix, dir="/tmp"))
        node = cls(tmp=tmp, name=tmp.name.replace("_", "x"), runtime=runtime)
        for sub in ("run", "var-lib-cni", "cni/bin", "cni/net.d", "opt", "runc", "logs",
                    "var-log", "var-lib-kubelet", "sysctl", "etc-crio"):
            (tmp / sub).mkdir(parents=True)
        for i, value in enumerate(KERNEL_TUNABLES.values()):
            (tmp / "sysctl" / str(i)).write_text(value + "\n", encoding="ascii")
        # Bound over the node's /etc/containerd/config.toml before the runtime writes it (in
        # place: the bind keeps its inode), so that the installer, which reads the runtime's
        # own config for the CNI dirs, reads this node's runtime and not the machine's package
        # default (Debian's names /usr/lib/cni).
        (tmp / "runtime.conf").touch()
        return node

    def paths(self) -> Paths:
        """The runtime's config names the CNI dirs where a kubeadm node has them: inside the
        node's mount namespace they are the node's own dirs (binds())."""
        return dataclasses.replace(super().paths(), cni_bin=Path(CNI_BIN),
                                   cni_conf=Path(CNI_CONF))

    @property
    def var_log(self) -> Path:
        """What /var/log is inside the node (the guard's default log is under it)."""
        return self.tmp / "var-log"

    def binds(self) -> list[tuple[Path, str]]:
        pairs = [(self.run, "/run"), (self.cni_cache, "/var/lib/cni"),
                 (self.cni_conf, CNI_CONF), (self.cni_bin, CNI_BIN), (self.var_log, "/var/log"),
                 (self.tmp / "var-lib-kubelet", "/var/lib/kubelet"),
                 (self.tmp / "runtime.conf", RUNTIME_CONFIG),
                 # The DaemonSet mounts CRI-O's config dir too (DirectoryOrCreate: a containerd
                 # node gets an empty one): the node's own, so the kubelet never makes the host's.
                 (self.tmp / "etc-crio", "/etc/crio")]
        pairs += [(self.tmp / "sysctl" / str(i), f"/proc/sys/{name}")
                  for i, name in enumerate(KERNEL_TUNABLES)]
        return pairs

    # --- the namespaces ----------------------------------------------------------------------

    def start_holder(self) -> None:
        self.holder_starts += 1
        overlays = self.tmp / "overlays" / str(self.holder_starts)
        argv = [str(overlays)]
        for src, dst in self.binds():
            argv += [str(src), dst]
        self.holder = subprocess.Popen(
            ["unshare", "--mount", "--net", "--propagation", "private", "--",
             sys.executable, "-I", "-c", HOLDER, *argv],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.holder.stdout is not None
        line = self.holder.stdout.readline()
        if line.strip() != "ready":
            self.holder.wait(timeout=30)
            raise RuntimeError(f"the node's namespace holder failed (said {line!r})")

    def nsenter(self) -> list[str]:
        """The argv prefix that runs a command inside the node (its mount and network)."""
        assert self.holder is not None
        ns = f"/proc/{self.holder.pid}/ns"
        return ["nsenter", f"--mount={ns}/mnt", f"--net={ns}/net", "--"]

    # --- the runtime -------------------------------------------------------------------------

    def start_runtime(self) -> None:
        """As the CRI suite starts it (its row's config and argv), inside the node's mount AND
        network namespaces: the pods' bridge and the kubelet's port are the node's own."""
        assert self.holder is not None and self.daemon is None
        config = self.write_config()
        self.starts += 1
        self._log = self.log_path.open("ab")
        self._log.write(f"\n===== start {self.starts} =====\n".encode())
        self._log.flush()
        # nsenter execs the runtime in place: the pid is the runtime's.
        self.daemon = subprocess.Popen(
            [*self.nsenter(), *self.runtime.argv(config)],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            env=self.runtime.env(),
        )
        wait_for(self._answers, f"{self.runtime.key} to answer on {self.socket}",
                 timeout=START_BOUND, every=0.2)

    # --- reboot and teardown -----------------------------------------------------------------

    def power_off(self) -> None:
        """What a hard reset leaves: every process of the node SIGKILLed at once, every mount
        (netns, rootfs, /run binds) gone with the namespace, /run empty, no cgroups."""
        pids = sorted(set(self._namespace_pids()) | set(self._cgroup_pids()))
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.daemon is not None:
            self.daemon.wait(timeout=30)
            self.daemon = None
            self._close_log()
        self._kill_leftovers()
        self._stop_holder()
        shutil.rmtree(self.run)
        self.run.mkdir()
        self._remove_cgroups()

    def _remove_bridges(self) -> None:
        """Nothing to do: the node's bridge lived in its own network namespace, gone with it."""
