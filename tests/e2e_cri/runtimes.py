"""The container runtimes the CRI suites drive: one row each, variation as data.

A row says where a runtime's binaries are (Debian's package, or a peer of peers/pins.tsv built by
tools/install-peers.sh), the config it is started with, how it is started, what it leaves in
volatile storage (gone after a "reboot"), how it reports its version, and the error lines it
writes for the events the scenarios look for. tests/e2e_cri/node.py starts, kills, restarts and
"reboots" any row the same way; nothing else in the suites asks which runtime it is on. This
module holds no test: the kubelet suite (driver "kubelet") uses the same rows.

The shim a containerd starts is the one built with it: containerd looks its shim up on PATH, so
the row's own bin dir comes first on the PATH it is started with, and `ctr` is the row's own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import peers

DEBIAN_BIN = Path("/usr/bin")
HOST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What every node needs besides the runtime's own binaries.
NODE_TOOLS = ("runc", "unshare", "nsenter", "gcc", "ip")

# containerd 1.6 and 1.7: config version 2, the CRI plugin in one piece (io.containerd.grpc.v1.cri).
CONTAINERD_V2 = """\
version = 2
root = "{tmp}/root"
state = "{state}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
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
      bin_dir = "{cni_bin}"
      conf_dir = "{cni_conf}"
      max_conf_num = 1
"""

# containerd 2.x: config version 3, the CRI plugin split into io.containerd.cri.v1.images (the
# sandbox image is a pinned image there), io.containerd.cri.v1.runtime (netns, CNI, runtimes) and
# io.containerd.grpc.v1.cri (the server: streaming); `bin_dirs` replaces the deprecated bin_dir.
CONTAINERD_V3 = """\
version = 3
root = "{tmp}/root"
state = "{state}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[debug]
  level = "debug"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "{tmp}/opt"
  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "{snapshotter}"
    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = "{image}"
  [plugins."io.containerd.cri.v1.runtime"]
    # runc cannot write oom_score_adj in this VM.
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    disable_apparmor = true
    enable_selinux = false
    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        snapshotter = "{snapshotter}"
        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          Root = "{tmp}/runc"
    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = ["{cni_bin}"]
      conf_dir = "{cni_conf}"
      max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri"]
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
"""


@dataclass(frozen=True)
class Paths:
    """Where a node keeps what a runtime's config names (node.py fills it in)."""

    tmp: Path
    socket: Path
    state: Path  # volatile: under /run on a real node, gone after a reboot
    cni_bin: Path
    cni_conf: Path
    image: str
    snapshotter: str


@dataclass(frozen=True)
class Messages:
    """The runtime's own words for what the scenarios look for (its gRPC error details)."""

    destroy_failed: str  # a CNI DEL failed while stopping or removing a sandbox
    name_reserved: str  # RunPodSandbox refused: a sandbox of that name still exists
    reserved_for: str  # ... and which one: format with {holder}


CONTAINERD_MESSAGES = Messages(
    destroy_failed="failed to destroy network for sandbox",
    name_reserved="failed to reserve sandbox name",
    reserved_for='is reserved for "{holder}"',
)


@dataclass(frozen=True)
class Runtime:
    """One runtime at one version, as the suites run it."""

    key: str  # the test id: containerd-1.6, containerd-2.1, ...
    runtime: str  # the matrix's name: "containerd" or "cri-o"
    binaries: Callable[[], dict[str, Path]]  # command -> path; raises LookupError when missing
    config: str  # the config template (str.format over Paths' fields)
    messages: Messages
    pinned: str  # how it is pinned: "Debian bookworm's package", "peers/pins.tsv"
    volatile: tuple[str, ...] = ("state",)  # Paths fields a reboot wipes (with /run)
    notes: tuple[str, ...] = field(default_factory=tuple)

    def missing(self) -> str | None:
        """Why this runtime cannot run here, or None."""
        try:
            bins = self.binaries()
        except LookupError as exc:
            return str(exc)
        absent = [str(p) for p in bins.values() if not os.access(p, os.X_OK)]
        absent += [t for t in NODE_TOOLS if shutil.which(t) is None]
        return f"missing {', '.join(absent)}" if absent else None

    def bin(self, command: str) -> Path:
        return self.binaries()[command]

    def env(self) -> dict[str, str]:
        """The daemon's environment: its own bin dir first on PATH (its shim), then the host's."""
        own = sorted({str(p.parent) for p in self.binaries().values()})
        return {"PATH": ":".join([*own, HOST_PATH]), "HOME": "/root", "LANG": "C.UTF-8"}

    def render_config(self, paths: Paths) -> str:
        return self.config.format(**{k: str(v) for k, v in vars(paths).items()})

    def argv(self, config: Path) -> list[str]:
        return [str(self.bin(self.runtime)), "--config", str(config)]

    def version(self) -> str:
        """The version as the binary reports it (`containerd --version`'s third field)."""
        out = subprocess.run([str(self.bin(self.runtime)), "--version"], capture_output=True,
                             text=True, check=True, timeout=30, env=self.env())
        return reported_version(out.stdout)

    # --- what a running daemon is asked outside CRI (containerd: ctr) -------------------------

    def ctr(self, socket: Path, *args: str, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.bin("ctr")), "-a", str(socket), "-n", "k8s.io", *args],
                              capture_output=True, text=True, check=check, timeout=timeout)

    def answers(self, socket: Path) -> bool:
        """Whether the daemon serves its API on socket yet."""
        if not socket.exists():
            return False
        out = self.ctr(socket, "version", check=False)
        return out.returncode == 0 and "Server:" in out.stdout

    def overlayfs_ok(self, socket: Path) -> bool:
        out = self.ctr(socket, "plugins", "ls").stdout
        return bool(re.search(r"io\.containerd\.snapshotter\.v1\s+overlayfs\s+\S+\s+ok", out))

    def run_pod_finished(self, log: str, name: str, uid: str) -> bool:
        """Whether log shows RunPodSandbox of that pod returned failed (after the runtime's own
        cleanup, which goes on after the client has given up)."""
        return re.search(rf"RunPodSandbox for &PodSandboxMetadata\{{Name:{re.escape(name)},"
                         rf"Uid:{re.escape(uid)},[^}}]*\}} failed, error", log) is not None

    def import_image(self, socket: Path, archive: Path, snapshotter: str) -> None:
        self.ctr(socket, "images", "import", "--snapshotter", snapshotter, str(archive))


def reported_version(line: str) -> str:
    """containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3 -> 1.6.20~ds1."""
    words = line.split()
    if len(words) < 3:
        raise ValueError(f"unexpected --version output: {line!r}")
    return words[2]


def _debian_containerd() -> dict[str, Path]:
    return {c: DEBIAN_BIN / c for c in ("containerd", "containerd-shim-runc-v2", "ctr")}


def _peer(name: str, version: str) -> Callable[[], dict[str, Path]]:
    def binaries() -> dict[str, Path]:
        peer = peers.find(name, version)
        if not peer.built():
            raise LookupError(f"{name} {version} is not built: run tools/install-peers.sh {name}")
        return {c: peer.bin(c) for c in peer.commands}

    return binaries


RUNTIMES: tuple[Runtime, ...] = (
    Runtime("containerd-1.6", "containerd", _debian_containerd, CONTAINERD_V2,
            CONTAINERD_MESSAGES, "Debian bookworm's package"),
    Runtime("containerd-1.7", "containerd", _peer("containerd", "v1.7.35"), CONTAINERD_V2,
            CONTAINERD_MESSAGES, "peers/pins.tsv"),
    Runtime("containerd-2.1", "containerd", _peer("containerd", "v2.1.6"), CONTAINERD_V3,
            CONTAINERD_MESSAGES, "peers/pins.tsv"),
)
BY_KEY = {r.key: r for r in RUNTIMES}
