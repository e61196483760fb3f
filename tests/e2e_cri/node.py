"""A throwaway node for one runtime row (runtimes.py): own config, root, state, socket and CNI dirs,
in one temp dir.

The runtime is never run as a system service and never touches the machine's /run/containerd,
/var/lib/containerd, /run/crio or /var/lib/containers:

- A holder process owns a private mount namespace (unshare --mount --propagation private) in which
  <tmp>/run is bind-mounted over /run (containerd-shim-runc-v2 puts its sockets under
  /run/containerd/s, a path compiled in) and <tmp>/var-lib-cni over /var/lib/cni (libcni's result
  cache, which go-cni in containerd 1.6 cannot move). Every runtime of this node is started
  inside that namespace with nsenter, so a restarted runtime finds the shims, netns mounts and
  snapshot mounts of the killed one, as on a real node.
- reboot() is a node's reboot as the runtime sees it: every process of the node killed, the
  holder (and so every mount: netns, rootfs, /run) gone, /run and the runtime's volatile state
  emptied, the cgroups removed; disk (root, /var/lib/cni, the CNI dirs) kept; then a new holder
  and the runtime started again.
- Pods get the cgroup parent /<name>, so their cgroups are found and removed afterwards.
- teardown() ends the runtime, every process left in the namespace or the cgroups, the holder (and
  with it every mount), the cgroups and the temp dir, and deletes the test's bridge devices.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tests.e2e_cri import pause_image
from tests.support import holder
from tests.support.daemon import Answer, Daemon
from tests.support.runtimes import Paths, Runtime
from tests.support.waiting import pid_alive, wait_gone

DEBIAN_CNI = Path("/usr/lib/cni")
START_BOUND = 90  # seconds a runtime may take to answer after start (under the other helpers' load)


@dataclass
class Node:
    tmp: Path
    name: str  # also the cgroup parent and the bridge device's prefix
    runtime: Runtime
    snapshotter: str = "overlayfs"
    holder: subprocess.Popen[str] | None = None
    daemon: Daemon | None = None  # the runtime, while it runs
    _log: IO[bytes] | None = None
    starts: int = 0
    notes: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, runtime: Runtime) -> Node:
        # Short path: unix socket paths are limited to 108 bytes.
        tmp = Path(tempfile.mkdtemp(prefix="dge2e-", dir="/tmp"))
        node = cls(tmp=tmp, name=tmp.name.replace("_", "x"), runtime=runtime)
        for sub in ("run", "var-lib-cni", "cni/bin", "cni/net.d", "opt", "runc", "logs"):
            (tmp / sub).mkdir(parents=True)
        return node

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
    def cgroup_parent(self) -> str:
        return f"/{self.name}"

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

    def start_holder(self) -> None:
        self.holder = holder.start([(self.run, "/run"), (self.cni_cache, "/var/lib/cni")])

    @property
    def enter(self) -> tuple[str, ...]:
        """The argv prefix that runs a command in the node's mount namespace (nsenter execs it in
        place); valid until power_off."""
        assert self.holder is not None
        return holder.enter(self.holder)

    def mount_ns(self) -> str:
        assert self.holder is not None
        return holder.mount_ns(self.holder)

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
            self.runtime.key, [*self.enter, *self.runtime.argv(config)], self.log_path,
            ready=Answer(lambda: self.runtime.answers(socket), f"an answer on {socket}"),
            env=self.runtime.env(), start_bound=START_BOUND, starts=self.starts - 1)
        self.daemon.start()

    def _answers(self) -> bool:
        """Whether the runtime answers yet (failing at once when it exited)."""
        assert self.daemon is not None
        if self.daemon.poll() is not None:
            code = self.daemon.returncode
            raise RuntimeError(f"{self.runtime.key} exited with {code}:\n{self.log_tail()}")
        return self.runtime.answers(self.socket)

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

    def _runtime_process(self) -> Daemon:
        """The running runtime as a Daemon (a subclass may have started it as a Popen)."""
        assert self.daemon is not None
        if isinstance(self.daemon, Daemon):
            return self.daemon
        return Daemon.adopt(self.runtime.key, self.daemon, self.log_path)

    def kill_runtime(self, with_plugins: bool = True) -> list[int]:
        """SIGKILL the runtime (and, as a crash of the node would, the CNI plugins it runs)."""
        plugins = self._runtime_process().kill(children=with_plugins)
        self._close_log()
        self.daemon = None
        return plugins

    def stop_runtime(self) -> None:
        if self.daemon is None:
            return
        self._runtime_process().stop(grace=20)
        self._close_log()
        self.daemon = None

    def _close_log(self) -> None:
        """The log of a runtime a subclass started itself (a Daemon's is closed at its start)."""
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart_runtime(self) -> None:
        self.kill_runtime()
        self.start_runtime()

    def power_off(self) -> None:
        """What a node's power loss does to the runtime: processes, mounts, /run and cgroups gone.

        Disk stays: the runtime's root, /var/lib/cni (libcni's cache, multus's), the CNI dirs."""
        if self.daemon is not None:
            self.kill_runtime()
        self._kill_leftovers()
        self._stop_holder()  # its namespace held every mount: netns, rootfs, /run
        self._remove_cgroups()
        for volatile in (self.run, self.tmp / "runc"):
            shutil.rmtree(volatile)
            volatile.mkdir()

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

    def teardown(self) -> list[str]:
        """Remove everything this node made; return what could not be removed."""
        problems: list[str] = []
        for step in (self.stop_runtime, self._kill_leftovers, self._stop_holder,
                     self._remove_cgroups, self._remove_bridges, self._remove_tmp):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - every step must run; each failure is reported
                problems.append(f"{step.__name__}: {exc!r}")
        return problems

    def _namespace_pids(self) -> list[int]:
        if self.holder is None or not pid_alive(self.holder.pid):
            return []
        ns = self.mount_ns()
        found = []
        for pid in _pids():
            if pid in (self.holder.pid, os.getpid()):
                continue
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/ns/mnt") == ns:
                    found.append(pid)
        return found

    def _cgroup_dirs(self) -> list[Path]:
        root = Path("/sys/fs/cgroup")
        tops = [root / self.name, *(d / self.name for d in root.iterdir() if d.is_dir())]
        return [top for top in tops if top.is_dir()]

    def _cgroup_pids(self) -> list[int]:
        pids: set[int] = set()
        for top in self._cgroup_dirs():
            for procs in top.rglob("cgroup.procs"):
                with contextlib.suppress(OSError):
                    pids.update(int(p) for p in procs.read_text().split())
        return sorted(pids)

    def _kill_leftovers(self) -> None:
        """Shims, pause processes and hung plugins: all live in our namespace or our cgroups.

        Looked for again until none is left: a process that forks while it is killed (a Go
        daemon of the node exec'ing a delegate in one thread as SIGKILL reaches the others)
        leaves a child the first look missed, and its cgroup could not be removed."""
        for _ in range(10):
            pids = sorted(set(self._namespace_pids()) | set(self._cgroup_pids()))
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            wait_gone(pids, "leftover shim, pause and plugin processes to exit")
        raise RuntimeError(f"processes of node {self.name} keep appearing: "
                           f"{[_described(p) for p in pids]}")

    def _stop_holder(self) -> None:
        if self.holder is None:
            return
        holder.stop(self.holder)
        self.holder = None

    def _remove_cgroups(self) -> None:
        for top in self._cgroup_dirs():
            for sub in sorted(top.rglob("*"), key=lambda p: len(p.parts), reverse=True):
                if sub.is_dir():
                    sub.rmdir()
            top.rmdir()

    def _remove_bridges(self) -> None:
        out = subprocess.run(
            ["ip", "-o", "link", "show"], capture_output=True, text=True, check=True
        )
        for match in re.finditer(r"^\d+: ([^:@]+)", out.stdout, re.M):
            if match.group(1).startswith(bridge_prefix(self.name)):
                subprocess.run(["ip", "link", "del", match.group(1)], check=True)

    def _remove_tmp(self) -> None:
        mounts = Path("/proc/self/mountinfo").read_text(encoding="utf-8")
        if str(self.tmp) in mounts:
            raise RuntimeError(f"mounts under {self.tmp} are still there; leaving it")
        shutil.rmtree(self.tmp)


def bridge_prefix(name: str) -> str:
    """Bridge devices of a node are named from this (IFNAMSIZ allows 15 characters)."""
    return "dg" + name.removeprefix("dge2e-")[:8]


def _described(pid: int) -> str:
    """pid, its threads' states and its command line, for an error message."""
    try:
        states = sorted({Path(f"/proc/{pid}/task/{t}/stat").read_text().rsplit(")", 1)[1].split()[0]
                         for t in os.listdir(f"/proc/{pid}/task")})
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError as exc:
        return f"{pid} ({exc.strerror})"
    return f"{pid} {''.join(states)} {argv}"


def _pids() -> list[int]:
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]
