"""Where a node keeps its CNI files: one row per distribution's layout, read by the installer,
the operator tools and the manifests alike (the kustomize overlays are checked against it).

Adding a layout is one row here, one overlay under installer/kustomize/overlays/<name>, and one
fake node root in tests/node_roots: no command asks which layout it runs on; each takes the row.
Where each path comes from (the distribution's source or docs) is the table in docs/install.md
("Node layouts"); the comments below name it too.

libcni's result cache and multus's cache are where their own defaults put them on every layout
found so far: containerd's CRI (go-cni) and CRI-O (ocicni) give libcni no cache dir, so libcni
uses /var/lib/cni (results under /var/lib/cni/results), and no distribution's multus deployment
sets `cniDir` (multus defaults it to /var/lib/cni/multus). A row that differs says so, and the
installer writes what differs from the guard's defaults into the conf (`guard_keys`), so the
plugin never asks at exec time.

`auto` picks the layout from what is under the node's root (`choose`): the layouts whose conf
dir holds a CNI conf (else those whose bin dir holds the guard); rows that share a conf dir are
told apart by a `sign`, a path only that distribution has. Two layouts found that disagree on a
path the command needs (each dir compared as the node resolves it, links followed inside the
root) is refused (UsageError, exit 2), never guessed; two that resolve to the same dirs are one
node (MicroK8s 1.29 links /etc/cni/net.d and /opt/cni/bin into the snap).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from cni_delguard.guard import defaults
from cni_delguard.node import bundle, confdir, kubeletconf, runtimeconf
from cni_delguard.node.errors import NoConfError
from cni_delguard.node.options import located, under
from cni_delguard.tooling import UsageError

AUTO = "auto"


@dataclass(frozen=True)
class Layout:
    name: str
    conf_dir: str
    # Candidates, newest first: the first that is a directory on the node is the bin dir.
    bin_dirs: tuple[str, ...]
    # A path only this distribution has: tells rows that share a conf dir apart (None: the
    # conf dir alone says it, or this is the row a shared conf dir means without a sign).
    sign: str | None = None
    # The host dir the DaemonSet mounts writable for the bin dir(s) (None: the one bin dir).
    bin_mount: str | None = None
    result_cache_dirs: tuple[str, ...] = defaults.RESULT_CACHE_DIRS
    multus_cache_dirs: tuple[str, ...] = defaults.MULTUS_CACHE_DIRS
    state_dir: str = defaults.STATE_DIR
    log_file: str = defaults.LOG_FILE
    # The host dirs of the runtime's config (runtimeconf.SOURCES reads files in them), which the
    # DaemonSet mounts read-only: where the runtime really looks for the conf and the plugin.
    # The first is mounted only when it is there (the distribution's own); a layout that names
    # two (standard: containerd's or CRI-O's, a node has one) has both made if missing.
    runtime_conf: tuple[str, ...] = ("/etc/containerd", "/etc/crio")

    def mounts(self) -> dict[str, str]:
        """The base DaemonSet's writable volumes (by name) and the host dir each is, on this
        layout: the conf dir, the bin dir (or the one dir that holds it: bin_mount), the state
        dir itself (the installer's lock, records and the guard's markers; not /var/lib/cni,
        where libcni's and the IPAM plugins' state is: issue 38), the log's dir (mounted
        read-only: the watcher reads the guard's log)."""
        return {
            "cni-bin": self.bin_mount or self.bin_dirs[0],
            "cni-conf": self.conf_dir,
            "cni-state": self.state_dir,
            "log": os.path.dirname(self.log_file),
        }

    def read_only_mounts(self) -> dict[str, tuple[str, str]]:
        """The DaemonSet's read-only hostPath volumes: name -> (host dir, hostPath type). Nothing
        else of the host is mounted (issue 38: no host `/`); the frozen plugin needs nothing of
        the node's userland to answer the probe (packaging/README.md)."""
        made = len(self.runtime_conf) > 1
        names = ["runtime-conf", *(f"runtime-conf-{i}" for i in range(2, 9))]
        mounts = {name: (path, "DirectoryOrCreate" if made else "Directory")
                  for name, path in zip(names, self.runtime_conf, strict=False)}
        # The kubelet's config file alone, for its deadlines (kubeletconf.py): kubeadm's path on
        # every layout, made empty where a node has none, which reads as the kubelet's default.
        mounts["kubelet-config"] = (kubeletconf.CONFIG, "FileOrCreate")
        return mounts


LAYOUTS: tuple[Layout, ...] = (
    # kubeadm and most distributions: containerd's CRI (go-cni DefaultNetDir, DefaultCNIDir) and
    # CRI-O (ocicni DefaultConfDir, DefaultBinDir) default to these.
    Layout("standard", "/etc/cni/net.d", ("/opt/cni/bin",)),
    # k3s writes its containerd config with these (pkg/agent/templates: bin_dir, conf_dir; the
    # conf dir is <data-dir>/agent/etc/cni/net.d). Its CNI bins moved to the fixed data/cni in
    # the October 2024 releases (k3s PR 10868, issue 10869); before, containerd's bin_dir was
    # literally data/<hash>/bin, the running release's dir (k3s resolves data/current when it
    # writes the config, issue 6118), which data/current links to (an absolute link:
    # options.located follows it inside the node's root, on every poll of the watcher). The
    # DaemonSet mounts data/ for both.
    # The DaemonSet mounts data/cni only (issue 38: not data/, every release's binaries,
    # containerd's among them), so a release before October 2024 needs the installer run by hand.
    Layout(
        "k3s",
        "/var/lib/rancher/k3s/agent/etc/cni/net.d",
        ("/var/lib/rancher/k3s/data/cni", "/var/lib/rancher/k3s/data/current/bin"),
        bin_mount="/var/lib/rancher/k3s/data/cni",
        runtime_conf=("/var/lib/rancher/k3s/agent/etc/containerd",),
    ),
    # RKE2 runs no embedded flannel (its CNI comes from charts), so k3s's template leaves the
    # cni section out and containerd keeps its defaults; /var/lib/rancher/rke2 is its data dir.
    Layout("rke2", "/etc/cni/net.d", ("/opt/cni/bin",), sign="/var/lib/rancher/rke2",
           runtime_conf=("/var/lib/rancher/rke2/agent/etc/containerd",)),
    # MicroK8s' containerd-template.toml: bin_dir ${SNAP_DATA}/opt/cni/bin, conf_dir
    # ${SNAP_DATA}/args/cni-network; run-containerd-with-args substitutes SNAP_DATA with the
    # revision's dir (/var/snap/microk8s/<revision>), which `current` links to: the watcher
    # follows `current` on every poll. The DaemonSet mounts the stable parent /var/snap/microk8s
    # (a hostPath through `current` is resolved once, by the kubelet, when the pod starts).
    # The DaemonSet mounts the revision's bin dir, conf dir and args/ only (issue 38: not the
    # snap's data, its certs and credentials among them): after `snap refresh microk8s` the pod
    # is restarted to follow the new revision (docs/install.md).
    Layout(
        "microk8s",
        "/var/snap/microk8s/current/args/cni-network",
        ("/var/snap/microk8s/current/opt/cni/bin",),
        bin_mount="/var/snap/microk8s/current/opt/cni/bin",
        runtime_conf=("/var/snap/microk8s/current/args",),
    ),
    # OpenShift's cluster-network-operator (pkg/network/multus.go): SystemCNIConfDir
    # /etc/kubernetes/cni/net.d, CNIBinDir /var/lib/cni/bin; multus keeps its cache in
    # /var/lib/cni/multus (bindata/network/multus/multus.yaml, "cni cache dir").
    Layout("openshift", "/etc/kubernetes/cni/net.d", ("/var/lib/cni/bin",),
           runtime_conf=("/etc/crio",)),
    # Talos: its CRI containerd (config /etc/cri/containerd.toml, constants.go) sets no CNI dirs,
    # so go-cni's DefaultNetDir and DefaultCNIDir apply (its kubelet has no --cni-conf-dir).
    Layout("talos", "/etc/cni/net.d", ("/opt/cni/bin",), sign="/etc/cri/containerd.toml",
           runtime_conf=("/etc/cri",)),
)
BY_NAME = {layout.name: layout for layout in LAYOUTS}
CHOICES = (AUTO, *BY_NAME)
STANDARD = BY_NAME["standard"]

# The fields a command may need from a layout (the ones `choose` compares).
FIELDS = tuple(f.name for f in fields(Layout)
               if f.name not in ("name", "sign", "bin_mount", "runtime_conf"))
_GUARD_KEYS = {
    "result_cache_dirs": ("resultCacheDirs", defaults.RESULT_CACHE_DIRS),
    "multus_cache_dirs": ("multusCacheDirs", defaults.MULTUS_CACHE_DIRS),
    "state_dir": ("stateDir", defaults.STATE_DIR),
    "log_file": ("logFile", defaults.LOG_FILE),
}


def add_option(parser: Any) -> None:
    """`--layout`, for every command that reads the node's paths."""
    parser.add_argument(
        "--layout",
        default=AUTO,
        choices=CHOICES,
        metavar="NAME",
        help=f"the node's layout, which gives the paths below: {', '.join(CHOICES)} "
        "(auto: found under --root; the default)",
    )


class NoLayoutError(NoConfError):
    """`auto` found no layout's conf (nor the guard) under the root."""


def guard_keys(layout: Layout) -> dict[str, object]:
    """The guard keys the installer writes for this layout: those whose value differs from the
    guard's own default (the plugin reads only its conf and its defaults)."""
    keys: dict[str, object] = {}
    for attr, (key, default) in _GUARD_KEYS.items():
        value = getattr(layout, attr)
        if value != default:
            keys[key] = list(value) if isinstance(value, tuple) else value
    return keys


def bin_dir(layout: Layout, root: str) -> str:
    """The layout's bin dir on this node, as the node names it: the first candidate that is a
    directory under the root (the first candidate when none is yet)."""
    for candidate in layout.bin_dirs:
        if os.path.isdir(located(root, candidate)):
            return candidate
    return layout.bin_dirs[0]


TABLE = "layout table"


def runtime_dirs(
    layout: Layout, root: str, conf_dir: str | None = None, bin_dir_: str | None = None
) -> tuple[str, str, str]:
    """The conf dir and bin dir the runtime uses, as the node names them, and where they came
    from: a flag given (`conf_dir`, `bin_dir_`) wins; else the runtime's own config where it is
    on the node (runtimeconf.py); else this table. A runtime config that cannot be used falls
    back to the table, and the source says why."""
    if conf_dir is not None and bin_dir_ is not None:
        return conf_dir, bin_dir_, "flags"
    why = ""
    try:
        found = runtimeconf.find(root, layout.name)
    except (runtimeconf.ConfigError, UsageError) as exc:
        found, why = None, f" (the runtime's config not used: {exc})"
    if found is None:
        return conf_dir or layout.conf_dir, bin_dir_ or bin_dir(layout, root), TABLE + why
    return conf_dir or found.conf_dir, bin_dir_ or found.bin_dir, found.source


def choose(
    root: str, name: str, needs: tuple[str, ...] = FIELDS, table: tuple[Layout, ...] = LAYOUTS
) -> Layout:
    """The layout called `name`, or for `auto` the one found under `root`. `needs`: the fields
    the caller will read; layouts found that agree on those are not an ambiguity.

    Nothing found: when every layout agrees on `needs`, the first row (standard); otherwise
    NoLayoutError (exit 4). Found layouts that disagree: UsageError (exit 2)."""
    if name != AUTO:
        try:
            return next(layout for layout in table if layout.name == name)
        except StopIteration:
            raise UsageError(f"--layout {name}: not one of {', '.join(CHOICES)}") from None
    found = _found(root, table, _has_conf) or _found(root, table, _has_guard)
    pool = found or list(table)
    if len({tuple(_value(layout, root, f) for f in needs) for layout in pool}) == 1:
        return _own(pool, root)
    if not found:
        dirs = ", ".join(dict.fromkeys(located(root, layout.conf_dir) for layout in table))
        raise NoLayoutError(
            f"no {'/'.join(confdir.EXTENSIONS)} file in {dirs} (the conf dirs of every "
            "layout); is the network plugin installed? (--wait SECONDS waits for it; "
            "--layout NAME names the layout)"
        )
    where = "; ".join(f"{layout.name}: {located(root, layout.conf_dir)}" for layout in found)
    raise UsageError(
        f"--layout auto: more than one layout under {root} ({where}); "
        f"pass --layout {'|'.join(layout.name for layout in found)}"
    )


# Path flags, and the field of a layout each stands in for.
_FLAGS = {"conf_dir": "conf_dir", "bin_dir": "bin_dirs", "state_dir": "state_dir",
          "log_file": "log_file"}


def of(args: Any, needs: tuple[str, ...] = FIELDS) -> Layout:
    """The layout of a command's `--layout` and `--root`; a field whose flag was given is not
    needed from it (explicit flags win, and cannot make an ambiguity)."""
    given = {field for attr, field in _FLAGS.items() if getattr(args, attr, None) is not None}
    return choose(args.root, args.layout, tuple(f for f in needs if f not in given))


def guard_path(args: Any, attr: str) -> str:
    """The guard's state dir or log file (`attr`: "state_dir", "log_file") for an operator
    tool: its flag when given, else the layout's, reached through --root. With the default
    root a relative flag is taken as given (a log copied off a node); '' stays ''."""
    value = getattr(args, attr)
    if value is None:
        value = getattr(of(args, (attr,)), attr)
    if value == "" or (not value.startswith("/") and os.path.abspath(args.root) == "/"):
        return str(value)
    return under(args.root, value)


def _value(layout: Layout, root: str, field: str) -> object:
    """A field as the node resolves it: dirs with the node's links followed inside the root, so
    MicroK8s 1.29's /etc/cni/net.d and /opt/cni/bin (links into the snap's revision) are the
    microk8s row's own dirs, one node, not two layouts."""
    if field == "bin_dirs":
        return located(root, bin_dir(layout, root))
    if field == "conf_dir":
        return located(root, layout.conf_dir)
    return getattr(layout, field)


def _own(pool: list[Layout], root: str) -> Layout:
    """Of layouts that resolve to the same dirs, the one whose conf dir is not itself a link
    into another's (MicroK8s' row, not `standard`'s /etc/cni/net.d linking to it); else the
    first."""
    return sorted(pool, key=lambda layout: os.path.islink(under(root, layout.conf_dir)))[0]


def _found(
    root: str, table: tuple[Layout, ...], present: Callable[[str, Layout], bool]
) -> list[Layout]:
    """The layouts `present(root, layout)` says are there; of rows sharing a conf dir, the
    one whose sign is there (or the one without a sign when no sign is)."""
    by_dir: dict[str, list[Layout]] = {}
    for layout in table:
        if present(root, layout):
            by_dir.setdefault(layout.conf_dir, []).append(layout)
    found = []
    for group in by_dir.values():
        signed = [g for g in group if g.sign and os.path.lexists(located(root, g.sign))]
        found += signed or [g for g in group if g.sign is None] or group
    return found


def _has_conf(root: str, layout: Layout) -> bool:
    try:
        return bool(confdir.conf_files(located(root, layout.conf_dir)))
    except (NoConfError, OSError):
        return False


def _has_guard(root: str, layout: Layout) -> bool:
    return any(
        os.path.lexists(os.path.join(located(root, d), bundle.LINK_NAME))
        for d in layout.bin_dirs
    )
