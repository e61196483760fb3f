"""The runtimes the kubelet suite drives: one row each, everything runtime-specific in one place.

A row says where the runtime's binaries are (Debian's package, or a peer of peers/pins.tsv built
by tools/install-peers.sh), the config it is started with and how it reports its version;
tests/e2e_kubelet/node.py starts, kills and "reboots" any row the same way, and nothing else in
the suite asks which runtime it runs on. (When the CRI suite's runtimes table, tests/e2e_cri,
lands, these two rows are its rows and this module goes.)

Inside the node's mount namespace the CNI dirs are where a kubeadm node has them (/etc/cni/net.d,
/opt/cni/bin; node.py binds the node's own dirs there), so that the installer's DaemonSet finds
the node's layout as it would on a real one.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support import peers

DEBIAN_BIN = Path("/usr/bin")
HOST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CNI_CONF = "/etc/cni/net.d"  # inside the node's mount namespace
CNI_BIN = "/opt/cni/bin"

# What every containerd of the suite shares: its root on disk, its state under the node's /run
# (gone after a "reboot"), its sockets, debug logs; {version} is the config format's.
_COMMON = """\
version = {version}
root = "{tmp}/root"
state = "{tmp}/run/containerd-state"
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
"""

# containerd 1.6: config version 2, the CRI plugin in one piece. runc's cgroup driver is
# cgroupfs (SystemdCgroup false, the default), the kubelet's too: there is no systemd here.
CONFIG_V2 = _COMMON.replace("{version}", "2") + """\
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

# containerd 2.x: config version 3. The CRI plugin is split: io.containerd.cri.v1.images (the
# sandbox image is a pinned image there), io.containerd.cri.v1.runtime (netns, CNI, runtimes:
# `bin_dirs` replaces bin_dir) and io.containerd.grpc.v1.cri (the streaming server).
CONFIG_V3 = _COMMON.replace("{version}", "3") + """\
  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "{snapshotter}"
    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = "{image}"
  [plugins."io.containerd.cri.v1.runtime"]
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
class Runtime:
    """One containerd at one version, as the suite runs it."""

    key: str  # the test id
    binaries: Callable[[], dict[str, Path]]  # command -> path; raises LookupError when not built
    config: str  # the config template (str.format: tmp, socket, image, snapshotter, cni_*)
    pinned: str  # where the version is pinned, for the report
    runtime: str = "containerd"  # the matrix's name

    def missing(self) -> str | None:
        """Why this runtime cannot run here, or None."""
        try:
            bins = self.binaries()
        except LookupError as exc:
            return str(exc)
        absent = [str(p) for p in bins.values() if not p.is_file()]
        return f"missing {', '.join(absent)}" if absent else None

    def bin(self, command: str) -> Path:
        return self.binaries()[command]

    def env(self) -> dict[str, str]:
        """The daemon's environment: its own bin dir first on PATH (containerd finds its shim
        there), then the host's (runc, mount)."""
        own = sorted({str(p.parent) for p in self.binaries().values()})
        return {"PATH": ":".join([*own, HOST_PATH]), "HOME": "/root", "LANG": "C.UTF-8"}

    def render(self, tmp: Path, socket: Path, image: str, snapshotter: str) -> str:
        return self.config.format(tmp=tmp, socket=socket, image=image, snapshotter=snapshotter,
                                  cni_bin=CNI_BIN, cni_conf=CNI_CONF)

    def version(self) -> str:
        """The version as the binary reports it: `containerd --version`'s third word."""
        out = subprocess.run([str(self.bin("containerd")), "--version"], capture_output=True,
                             text=True, check=True, timeout=30, env=self.env())
        words = out.stdout.split()
        if len(words) < 3:
            raise ValueError(f"unexpected containerd --version output: {out.stdout!r}")
        return words[2]


def _debian() -> dict[str, Path]:
    return {c: DEBIAN_BIN / c for c in ("containerd", "containerd-shim-runc-v2", "ctr")}


def _peer(name: str, version: str) -> Callable[[], dict[str, Path]]:
    def binaries() -> dict[str, Path]:
        peer = peers.find(name, version)
        if not peer.built():
            raise LookupError(f"{name} {version} is not built: run tools/install-peers.sh {name}")
        return {c: peer.bin(c) for c in peer.commands}

    return binaries


RUNTIMES: tuple[Runtime, ...] = (
    Runtime("containerd-1.6", _debian, CONFIG_V2, "Debian bookworm's package"),
    Runtime("containerd-2.1", _peer("containerd", "v2.1.6"), CONFIG_V3, "peers/pins.tsv"),
)
