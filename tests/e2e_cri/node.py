"""A throwaway node for one runtime row (tests/support/runtimes.py): tests/support/node.py's Node
configured for a runtime (own config, root, state, socket and CNI dirs, in one temp dir), and the
runtime's lifecycle on it.

The runtime is never run as a system service and never touches the machine's /run/containerd,
/var/lib/containerd, /run/crio or /var/lib/containers:

- The node's holder owns a private mount namespace in which <tmp>/run is bound over /run
  (containerd-shim-runc-v2 puts its sockets under /run/containerd/s, a path compiled in) and
  <tmp>/var-lib-cni over /var/lib/cni (libcni's result cache, which go-cni in containerd 1.6
  cannot move). Every runtime of this node is started inside that namespace with nsenter, so a
  restarted runtime finds the shims, netns mounts and snapshot mounts of the killed one, as on a
  real node.
- reboot() is a node's reboot as the runtime sees it: every process of the node killed, the
  holder (and so every mount: netns, rootfs, /run) gone, /run and the runtime's volatile state
  emptied, the cgroups removed; disk (root, /var/lib/cni, the CNI dirs) kept; then a new holder
  and the runtime started again.
- Pods get the cgroup parent /<name>, so their cgroups are found and removed afterwards.
- teardown() ends the runtime, every process left in the namespace or the cgroups, the holder (and
  with it every mount), the cgroups and the temp dir, and deletes the test's bridge devices.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from tests.e2e_cri import pause_image
from tests.support import node as base
from tests.support.daemon import Answer, Daemon
from tests.support.runtimes import Paths, Runtime

DEBIAN_CNI = Path("/usr/lib/cni")


@dataclass
class Node(base.Node):
    """name: also the cgroup parent and the bridge device's prefix."""

    runtime: Runtime = field(kw_only=True)
    snapshotter: str = "overlayfs"
    daemon: Daemon | None = None  # the runtime, while it runs
    starts: int = 0

    prefix: ClassVar[str] = "dge2e-"
    dirs: ClassVar[tuple[str, ...]] = ("cni/bin", "cni/net.d", "opt", "runc", "logs")
    own: ClassVar[tuple[tuple[str, str], ...]] = (("run", "/run"),
                                                  ("var-lib-cni", "/var/lib/cni"))
    volatile: ClassVar[tuple[str, ...]] = ("run", "runc")
    start_bound: ClassVar[float] = 90  # s a runtime may take to answer (under the others' load)

    @classmethod
    def create(cls, runtime: Runtime) -> Node:
        return cls.make(runtime=runtime)

    # --- paths -------------------------------------------------------------------------------

    @property
    def socket(self) -> Path:
        return self.tmp / "cri.sock"

    @property
    def cni_bin(self) -> Path:
        return self.tmp / "cni" / "bin"

    @property
    def cni_conf(self) -> Path:
        return self.tmp / "cni" / "net.d"

    @property
    def cni_cache(self) -> Path:
        """What /var/lib/cni is inside the node's mount namespace."""
        return self.tmp / "var-lib-cni"

    @property
    def run(self) -> Path:
        """What /run is inside the node's mount namespace (emptied at power_off)."""
        return self.tmp / "run"

    @property
    def log_path(self) -> Path:
        return self.tmp / "logs" / "runtime.log"

    def paths(self) -> Paths:
        return Paths(tmp=self.tmp, socket=self.socket, state=self.run / "rt-state",
                     cni_bin=self.cni_bin, cni_conf=self.cni_conf, image=pause_image.IMAGE_REF,
                     snapshotter=self.snapshotter)

    # --- set-up ------------------------------------------------------------------------------

    def install_debian_plugins(
        self, names: tuple[str, ...] = ("bridge", "host-local", "loopback")
    ) -> None:
        for plugin in names:
            (self.cni_bin / plugin).symlink_to(DEBIAN_CNI / plugin)

    def write_conflist(self, conf: dict[str, object]) -> Path:
        """Atomically replace the node's one conflist."""
        import json

        path = self.cni_conf / "10-e2e.conflist"
        # Renamed within the dir: containerd 1.6 ignores a file created in (or moved into) its conf
        # dir and reloads on a write or a rename; the .tmp name is no conf to either runtime.
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(conf, indent=1), encoding="utf-8")
        tmp.rename(path)
        return path

    # --- the runtime -------------------------------------------------------------------------

    def write_config(self) -> Path:
        path = self.tmp / "runtime.conf"
        path.write_text(self.runtime.render_config(self.paths()), encoding="utf-8")
        self.runtime.write_files(self.paths())
        return path

    def start_runtime(self) -> None:
        """Started in the node (nsenter execs it in place: the pid is the runtime's), ready when
        it answers on its socket."""
        assert self.holder is not None and self.daemon is None
        config = self.write_config()
        self.starts += 1
        socket = self.socket
        self.daemon = Daemon(
            self.runtime.key, [*self.enter_all, *self.runtime.argv(config)], self.log_path,
            ready=Answer(lambda: self.runtime.answers(socket), f"an answer on {socket}"),
            env=self.runtime.env(), start_bound=self.start_bound, starts=self.starts - 1)
        self.daemon.start()

    def start_runtime_on_a_working_snapshotter(self) -> None:
        """Start the runtime; where overlayfs does not work here (a nested overlay), again on the
        native snapshotter."""
        self.start_runtime()
        if not self.overlayfs_ok():
            self.notes.append("overlayfs unusable here: native snapshotter")
            self.stop_runtime()
            self.snapshotter = "native"
            self.start_runtime()

    def ctr(self, *args: str, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return self.runtime.ctr(self.socket, *args, check=check, timeout=timeout)

    def overlayfs_ok(self) -> bool:
        return self.runtime.overlayfs_ok(self.socket)

    def kill_runtime(self, with_plugins: bool = True) -> list[int]:
        """SIGKILL the runtime (and, as a crash of the node would, the CNI plugins it runs)."""
        assert self.daemon is not None
        plugins = self.daemon.kill(children=with_plugins)
        self.daemon = None
        return plugins

    def stop_runtime(self) -> None:
        if self.daemon is None:
            return
        self.daemon.stop(grace=20)
        self.daemon = None

    def restart_runtime(self) -> None:
        self.kill_runtime()
        self.start_runtime()

    def power_off(self) -> None:
        """What a node's power loss does to the runtime: processes, mounts, /run and cgroups gone.

        Disk stays: the runtime's root, /var/lib/cni (libcni's cache, multus's), the CNI dirs."""
        if self.daemon is not None:
            self.kill_runtime()
        super().power_off()

    def boot(self) -> None:
        self.start_holder()
        self.start_runtime()

    def come_up(self, archive: Path) -> None:
        """A fresh node's first start: the holder and the runtime (on the native snapshotter
        where overlayfs does not work here), then the pause image imported."""
        self.start_holder()
        self.start_runtime_on_a_working_snapshotter()
        self.import_image(archive)

    def reboot(self) -> None:
        self.power_off()
        self.boot()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def import_image(self, archive: Path) -> None:
        self.runtime.import_image(self.paths(), archive)

    # --- teardown ----------------------------------------------------------------------------

    def teardown_steps(self) -> list[Callable[[], None]]:
        return [self.stop_runtime, self._delete_netns, self._kill_leftovers, self._stop_holder,
                self._remove_cgroups, self._remove_bridges, self._remove_tmp]

    def _remove_bridges(self) -> None:
        out = subprocess.run(
            ["ip", "-o", "link", "show"], capture_output=True, text=True, check=True
        )
        for match in re.finditer(r"^\d+: ([^:@]+)", out.stdout, re.M):
            if match.group(1).startswith(bridge_prefix(self.name)):
                subprocess.run(["ip", "link", "del", match.group(1)], check=True)


def bridge_prefix(name: str) -> str:
    """Bridge devices of a node are named from this (IFNAMSIZ allows 15 characters)."""
    return "dg" + name.removeprefix("dge2e-")[:8]
