"""A throwaway containerd "node": own config, root, state, socket and CNI dirs, in one temp dir.

containerd is never run as a system service and never touches the machine's /run/containerd:

- A holder process owns a private mount namespace (unshare --mount --propagation private) in which
  <tmp>/run is bind-mounted over /run (containerd-shim-runc-v2 puts its sockets under
  /run/containerd/s, a path compiled in) and <tmp>/var-lib-cni over /var/lib/cni (libcni's result
  cache, which go-cni in containerd 1.6 cannot move). Every containerd of this node is started
  inside that namespace with nsenter, so a restarted containerd finds the shims, netns mounts and
  snapshot mounts of the killed one, as on a real node.
- Pods get the cgroup parent /<name>, so their cgroups are found and removed afterwards.
- teardown() ends containerd, every process left in the namespace or the cgroups, the holder (and
  with it every mount), the cgroups and the temp dir, and deletes the test's bridge device.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tests.e2e_cri import pause_image
from tests.support.waiting import descendants, pid_alive, wait_for, wait_gone

HOLDER = r"""
import subprocess, sys
for src, dst in zip(sys.argv[1::2], sys.argv[2::2]):
    subprocess.run(["mount", "--bind", src, dst], check=True)
print("ready", flush=True)
sys.stdin.read()
"""

CONFIG = """\
version = 2
root = "{tmp}/root"
state = "{tmp}/state"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{tmp}/containerd.sock"
[ttrpc]
  address = "{tmp}/containerd.sock.ttrpc"
[debug]
  level = "debug"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "{tmp}/opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "{image}"
    # runc cannot write oom_score_adj in this VM.
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    disable_apparmor = true
    enable_selinux = false
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "{snapshotter}"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          Root = "{tmp}/runc"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "{tmp}/cni/bin"
      conf_dir = "{tmp}/cni/net.d"
      max_conf_num = 1
"""

DEBIAN_CNI = Path("/usr/lib/cni")
TOOLS = ("containerd", "ctr", "runc", "containerd-shim-runc-v2", "unshare", "nsenter", "gcc")


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def containerd_version() -> str:
    out = subprocess.run(["containerd", "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


@dataclass
class Node:
    tmp: Path
    name: str  # also the cgroup parent and the bridge device's prefix
    snapshotter: str = "overlayfs"
    holder: subprocess.Popen[str] | None = None
    containerd: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None
    starts: int = 0
    notes: list[str] = field(default_factory=list)

    @classmethod
    def create(cls) -> Node:
        # Short path: unix socket paths are limited to 108 bytes.
        tmp = Path(tempfile.mkdtemp(prefix="dge2e-", dir="/tmp"))
        node = cls(tmp=tmp, name=tmp.name.replace("_", "x"))
        for sub in ("run", "var-lib-cni", "cni/bin", "cni/net.d", "opt", "runc", "logs"):
            (tmp / sub).mkdir(parents=True)
        return node

    # --- paths -------------------------------------------------------------------------------

    @property
    def socket(self) -> Path:
        return self.tmp / "containerd.sock"

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
    def cgroup_parent(self) -> str:
        return f"/{self.name}"

    @property
    def log_path(self) -> Path:
        return self.tmp / "logs" / "containerd.log"

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
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(conf, indent=1), encoding="utf-8")
        tmp.rename(path)
        return path

    def start_holder(self) -> None:
        binds = [str(self.tmp / "run"), "/run", str(self.cni_cache), "/var/lib/cni"]
        self.holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--",
             sys.executable, "-I", "-c", HOLDER, *binds],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.holder.stdout is not None
        line = self.holder.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"mount namespace holder failed (said {line!r})")

    def mount_ns(self) -> str:
        assert self.holder is not None
        return os.readlink(f"/proc/{self.holder.pid}/ns/mnt")

    # --- containerd --------------------------------------------------------------------------

    def write_config(self) -> Path:
        path = self.tmp / "config.toml"
        path.write_text(
            CONFIG.format(tmp=self.tmp, image=pause_image.IMAGE_REF, snapshotter=self.snapshotter),
            encoding="utf-8",
        )
        return path

    def start_containerd(self) -> None:
        assert self.holder is not None and self.containerd is None
        config = self.write_config()
        self.starts += 1
        self._log = self.log_path.open("ab")
        self._log.write(f"\n===== start {self.starts} =====\n".encode())
        self._log.flush()
        # nsenter execs containerd in place (no fork for a mount namespace): pid is containerd's.
        self.containerd = subprocess.Popen(
            ["nsenter", f"--mount=/proc/{self.holder.pid}/ns/mnt", "--",
             "containerd", "--config", str(config)],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
        )
        wait_for(self._answers, f"containerd to answer on {self.socket}", timeout=60)

    def _answers(self) -> bool:
        assert self.containerd is not None
        if self.containerd.poll() is not None:
            code = self.containerd.returncode
            raise RuntimeError(f"containerd exited with {code}:\n{self.log_tail()}")
        if not self.socket.exists():
            return False
        out = self.ctr("version", check=False)
        return out.returncode == 0 and "Server:" in out.stdout

    def ctr(
        self, *args: str, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ctr", "-a", str(self.socket), "-n", "k8s.io", *args],
            capture_output=True, text=True, check=check, timeout=timeout,
        )

    def overlayfs_ok(self) -> bool:
        out = self.ctr("plugins", "ls").stdout
        return bool(re.search(r"io\.containerd\.snapshotter\.v1\s+overlayfs\s+\S+\s+ok", out))

    def kill_containerd(self, with_plugins: bool = True) -> list[int]:
        """SIGKILL containerd (and, as a crash of the node would, the CNI plugins it runs)."""
        assert self.containerd is not None
        pid = self.containerd.pid
        plugins = descendants(pid) if with_plugins else []
        os.kill(pid, signal.SIGKILL)
        for child in plugins:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        self.containerd.wait(timeout=30)
        wait_gone(plugins, "the killed containerd's CNI plugins to exit")
        self._close_log()
        self.containerd = None
        return plugins

    def stop_containerd(self) -> None:
        if self.containerd is None:
            return
        self.containerd.terminate()
        try:
            self.containerd.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.containerd.kill()
            self.containerd.wait(timeout=20)
        self._close_log()
        self.containerd = None

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart_containerd(self) -> None:
        self.kill_containerd()
        self.start_containerd()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def import_image(self, archive: Path) -> None:
        self.ctr("images", "import", "--snapshotter", self.snapshotter, str(archive))

    # --- teardown ----------------------------------------------------------------------------

    def teardown(self) -> list[str]:
        """Remove everything this node made; return what could not be removed."""
        problems: list[str] = []
        for step in (self.stop_containerd, self._kill_leftovers, self._stop_holder,
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
        """Shims, pause processes and hung plugins: all live in our namespace or our cgroups."""
        pids = sorted(set(self._namespace_pids()) | set(self._cgroup_pids()))
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_gone(pids, "leftover shim, pause and plugin processes to exit")

    def _stop_holder(self) -> None:
        if self.holder is None:
            return
        assert self.holder.stdin is not None
        self.holder.stdin.close()
        self.holder.wait(timeout=20)
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


def _pids() -> list[int]:
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]
