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
from dataclasses import dataclass
from pathlib import Path

from tests.support import peers
from tests.support.daemon import unix_http_status

DEBIAN_BIN = Path("/usr/bin")
HOST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What every node needs besides the runtime's own binaries.
NODE_TOOLS = ("runc", "unshare", "nsenter", "gcc", "ip")

# What every containerd config here starts with (after its version line): its own root, state,
# sockets and opt dir under the node's, debug logs, and the plugins this host cannot run left out
# (1.6 has no erofs, 2.x no aufs: a version starts with a name it does not have in the list).
CONTAINERD_COMMON = """\
root = "{tmp}/root"
state = "{state}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.erofs",
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

# containerd 1.6 and 1.7: config version 2, the CRI plugin in one piece (io.containerd.grpc.v1.cri).
CONTAINERD_V2 = "version = 2\n" + CONTAINERD_COMMON + """\
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
CONTAINERD_V3 = "version = 3\n" + CONTAINERD_COMMON + """\
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


# CRI-O: every path of its own under the node's dir (/run's under the volatile state dir, so that
# a reboot wipes them and CRI-O sees the reboot by its version file), no infra container (its
# default: a sandbox without a shared PID namespace needs no pause process, so no image), runc and
# conmon from Debian, cgroupfs (no systemd here), its own empty drop-in dir instead of /etc's.
CRIO_CONF = """\
[crio]
root = "{tmp}/crio/root"
runroot = "{state}/storage"
storage_driver = "{storage_driver}"
log_dir = "{tmp}/crio/pods"
version_file = "{state}/version"
version_file_persist = "{tmp}/crio/version"
clean_shutdown_file = "{tmp}/crio/clean.shutdown"

[crio.api]
listen = "{socket}"
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
selinux = false
drop_infra_ctr = true
log_level = "debug"
namespaces_dir = "{state}/ns"
pinns_path = "{bin_pinns}"
container_exits_dir = "{state}/exits"
container_attach_socket_dir = "{state}/attach"
irqbalance_config_file = "{tmp}/crio/irqbalance"
irqbalance_config_restore_file = "disable"
hooks_dir = []

[crio.runtime.runtimes.runc]
runtime_path = "/usr/sbin/runc"
runtime_type = "oci"
runtime_root = "{tmp}/runc"
monitor_path = "/usr/bin/conmon"
monitor_cgroup = "pod"

[crio.image]
pause_image = "{image}"
signature_policy = "{tmp}/crio/policy.json"

[crio.network]
network_dir = "{cni_conf}"
plugin_dirs = ["{cni_bin}"]

[crio.metrics]
enable_metrics = false

[crio.nri]
enable_nri = false
"""
CRIO_POLICY = '{{"default": [{{"type": "insecureAcceptAnything"}}]}}\n'


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
    reserved_for: str | None  # ... and which one (format with {holder}); None: not said


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
    files: tuple[tuple[str, str], ...] = ()  # (path under the node's dir, template) it reads
    needs_image: bool = True  # whether a sandbox needs the pause image imported
    tools: tuple[str, ...] = ()  # what it needs on PATH besides NODE_TOOLS (Debian's conmon)
    # How long an abandoned RunPodSandbox (the client gone, the ADD hanging) may take to return:
    # containerd cancels the ADD with the request; CRI-O gives the ADD its own 5 minutes beyond
    # the client's deadline (server/sandbox_network.go: startTimeout), then tears it down.
    abandoned_run_bound: float = 120
    cancels_add: bool = True  # whether it kills the plugin when the client's deadline passes
    # A row either side of containerd's CNIResult check (BOUNDARY below): it runs only the
    # matrix's cases that check decides (matrix_chains.BOUNDARY), no other test.
    boundary: bool = False

    def missing(self) -> str | None:
        """Why this runtime cannot run here, or None."""
        try:
            bins = self.binaries()
        except LookupError as exc:
            return str(exc)
        absent = [str(p) for p in bins.values() if not os.access(p, os.X_OK)]
        absent += [t for t in (*NODE_TOOLS, *self.tools) if shutil.which(t) is None]
        return f"missing {', '.join(absent)}" if absent else None

    def bin(self, command: str) -> Path:
        return self.binaries()[command]

    def env(self) -> dict[str, str]:
        """The daemon's environment: its own bin dir first on PATH (its shim), then the host's."""
        own = sorted({str(p.parent) for p in self.binaries().values()})
        return {"PATH": ":".join([*own, HOST_PATH]), "HOME": "/root", "LANG": "C.UTF-8"}

    def _values(self, paths: Paths) -> dict[str, str]:
        values = {k: str(v) for k, v in vars(paths).items()}
        values |= {f"bin_{c.replace('-', '_')}": str(p) for c, p in self.binaries().items()}
        values["storage_driver"] = STORAGE_DRIVER[paths.snapshotter]
        return values

    def render_config(self, paths: Paths) -> str:
        return self.config.format(**self._values(paths))

    def write_files(self, paths: Paths) -> None:
        """What the config names besides itself (CRI-O's signature policy)."""
        for rel, template in self.files:
            target = paths.tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(template.format(**self._values(paths)), encoding="utf-8")

    def argv(self, config: Path) -> list[str]:
        return [str(self.bin(self.daemon)), "--config", str(config)]

    @property
    def daemon(self) -> str:
        return "crio" if self.runtime == "cri-o" else self.runtime

    def conf_mark(self, log: str) -> int:
        """Where the log stands before a conflist is written (see conf_loaded)."""
        return 0

    def conf_loaded(self, cni_config: Callable[[], str], log: Callable[[], str], mark: int,
                    token: str) -> bool:
        """Whether the runtime has loaded the conflist written after mark (holding token).

        containerd's verbose CRI Status shows the config it loaded."""
        return token in cni_config()

    def version(self) -> str:
        """The version as the binary reports it (`containerd --version`'s third field)."""
        out = subprocess.run([str(self.bin(self.daemon)), "--version"], capture_output=True,
                             text=True, check=True, timeout=30, env=self.env())
        return reported_version(out.stdout)

    # --- what a running daemon is asked outside CRI (containerd: ctr) -------------------------

    def ctr(self, socket: Path, *args: str, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.bin("ctr")), "-a", str(socket), "-n", "k8s.io", *args],
                              capture_output=True, text=True, check=check, timeout=timeout)

    def answers(self, socket: Path) -> bool:
        """Whether the daemon serves its API on socket yet: its own answer to `ctr version`."""
        if not socket.exists():
            return False  # ctr would wait for it
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

    def import_image(self, paths: Paths, archive: Path) -> None:
        self.ctr(paths.socket, "images", "import", "--snapshotter", paths.snapshotter,
                 str(archive))


STORAGE_DRIVER = {"overlayfs": "overlay", "native": "vfs"}  # containerd's snapshotter, CRI-O's


@dataclass(frozen=True)
class Crio(Runtime):
    """CRI-O: started with its config and an empty drop-in dir; no ctr (probes over the socket)."""

    def argv(self, config: Path) -> list[str]:
        return [*super().argv(config), "--config-dir", str(config.parent / "crio" / "conf.d")]

    def write_files(self, paths: Paths) -> None:
        super().write_files(paths)
        (paths.tmp / "crio" / "conf.d").mkdir(parents=True, exist_ok=True)

    def version(self) -> str:
        """`crio --version` prints `crio version 1.36.3`, then its build's details."""
        out = subprocess.run([str(self.bin("crio")), "--version"], capture_output=True,
                             text=True, check=True, timeout=30, env=self.env())
        found = re.search(r"^crio version (\S+)", out.stdout, re.M)
        if found is None:
            raise ValueError(f"unexpected crio --version output: {out.stdout!r}")
        return found.group(1)

    def answers(self, socket: Path) -> bool:
        """Its info endpoint answers: HTTP on the CRI socket, beside gRPC (server/inspect.go's
        InspectInfoEndpoint, what `crio status info` asks). CRI-O binds its socket before it has
        made its services (cmd/crio/main.go), so a connection alone proves nothing."""
        return unix_http_status(socket, "/info") == 200

    def overlayfs_ok(self, socket: Path) -> bool:
        return True  # CRI-O refuses to start when its storage driver does not work

    def import_image(self, paths: Paths, archive: Path) -> None:
        """Into CRI-O's own storage (CRIO_CONF's root and runroot) with Debian's podman: CRI-O
        pulls from registries only, and resolves the pause image for a sandbox even without an
        infra container."""
        storage = ["--root", str(paths.tmp / "crio" / "root"),
                   "--runroot", str(paths.state / "storage"),
                   "--storage-driver", STORAGE_DRIVER[paths.snapshotter],
                   "--tmpdir", str(paths.tmp / "podman-tmp"), "--events-backend", "none",
                   "--cgroup-manager", "cgroupfs"]
        loaded = subprocess.run(["podman", *storage, "load", "-q", "-i", str(archive)],
                                capture_output=True, text=True, check=True, timeout=300)
        image = loaded.stdout.strip().rsplit(" ", 1)[-1]
        subprocess.run(["podman", *storage, "tag", image, paths.image], capture_output=True,
                       text=True, check=True, timeout=60)

    def conf_mark(self, log: str) -> int:
        return len(log)

    def conf_loaded(self, cni_config: Callable[[], str], log: Callable[[], str], mark: int,
                    token: str) -> bool:
        """CRI-O's CRI shows no CNI config, so its log: ocicni logs the event of a conf file
        (10-e2e.conflist renamed in place) and then each load of the dir; a load logged after
        that event, or after a start, read the file written after mark."""
        since = log()[mark:]
        after = [m.end() for m in re.finditer(CRIO_CONF_EVENT + "|" + START_LINE, since)]
        return bool(after) and CRIO_CONF_LOADED in since[after[0]:]

    def run_pod_finished(self, log: str, name: str, uid: str) -> bool:
        """At debug level CRI-O logs each request and its response under one request id."""
        meta = rf'name:\\"{re.escape(name)}\\"\s+uid:\\"{re.escape(uid)}\\"'  # protobuf text
        for request in re.finditer(rf'msg="Request: [^\n]*RunPodSandboxRequest[^\n]*{meta}'
                                   r"[^\n]*\bid=(\S+)", log):
            if re.search(rf'msg="Response[^\n]*\bid={re.escape(request.group(1))}\b', log):
                return True
        return False


CRIO_CONF_LOADED = "Found CNI network e2e "  # ocicni, on every load of the conf dir
# ocicni, on each event of a conf file (logrus escapes the quotes around its path)
CRIO_CONF_EVENT = r'CNI monitoring event \S+\s+\\?"[^"\\]*/10-e2e\.conflist\\?"'
START_LINE = r"===== start \d+ ====="  # node.py's line before each start of the runtime
CRIO_MESSAGES = Messages(
    destroy_failed="network teardown failed for pod sandbox",
    name_reserved="name is reserved",
    reserved_for=None,
)


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
    Crio("cri-o-1.36", "cri-o", _peer("cri-o", "v1.36.3"), CRIO_CONF, CRIO_MESSAGES,
         "peers/pins.tsv", files=(("crio/policy.json", CRIO_POLICY),), needs_image=False,
         tools=("conmon", "podman"), abandoned_run_bound=5 * 60 + 120, cancels_add=False),
    *(Runtime(f"containerd-{v.removeprefix('v')}", "containerd", _peer("containerd", v),
              CONTAINERD_V2, CONTAINERD_MESSAGES, "peers/pins.tsv", boundary=True)
      for v in ("v1.6.38", "v1.7.22")),
)
# containerd stopped running DEL for a sandbox whose ADD never completed (StopPodSandbox tears
# the network down only `if sandbox.CNIResult != nil`) in 1.6.37, 1.7.23 and 2.0: v1.6.38 has
# the check (pkg/cri/server/sandbox_stop.go:101), v1.7.22, the last 1.7 without it, has not
# (pkg/cri/server/sandbox_stop.go:107 tears down unconditionally). Their rows above.
BOUNDARY = tuple(r for r in RUNTIMES if r.boundary)
FULL = tuple(r for r in RUNTIMES if not r.boundary)  # the rows every CRI test runs on
BY_KEY = {r.key: r for r in RUNTIMES}
