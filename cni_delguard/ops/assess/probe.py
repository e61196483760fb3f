"""What `assess` reads on the node (the I/O shell; chains.py, ranges.py and report.py decide).

assess reads files and runs nothing: no binary of the node (nor any other) is executed, so a
process that names itself `containerd` cannot have its executable run by assess as root, and no
version output is held in memory. What a file cannot tell, the user gives:

- the runtime and its version: `--runtime NAME://VERSION`, as the kubelet reports it (CRI
  Version's runtime_name and runtime_version: `kubectl get node -o wide`, CONTAINER-RUNTIME),
  else the version of the runtime's package in the node's dpkg database (DPKG_STATUS), which
  says what is installed (a daemon not restarted since an upgrade still runs the older one; the
  text names the source). Otherwise the runtime is not found, and report.RUNTIME_HINT says how
  to give it.
- multus's version: `--multus-version`, else unknown.

What sits behind the guard: the conf the runtime uses (the first by name in the conf dir that
doctor finds through the layout: doctor.node.discover), wrapped or not; the wrapped (or the
to-be-wrapped) plugin; for multus, how its network is given (chains.form_of) and which plugins
that network holds (read from the conf, the file `clusterNetwork` names, or the conf dir's file
of that network name); thick's `multusConfigFile` from the daemon config where the node has it
(under the conf dir, or the running daemon's `-config` read inside that process's root). Every
node path goes through `here()`; every file is read bounded and without following a final
symlink (fsutil.read_at); nothing is written.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from typing import Any

from cni_delguard.node import confdir, multusdaemon, options, patch
from cni_delguard.ops.assess import chains
from cni_delguard.ops.assess.facts import Found, Runtime
from cni_delguard.ops.doctor.node import Node
from cni_delguard.state import fsutil
from cni_delguard.tooling import UsageError

MAX_CONF = 4 * 1024 * 1024
MAX_DPKG = 64 * 1024 * 1024  # a node with thousands of packages holds a few MiB
DPKG_STATUS = "/var/lib/dpkg/status"
# The matrix's runtime name of each name a runtime gives itself in CRI Version (runtime_name).
CRI_NAMES = {"containerd": "containerd", "cri-o": "cri-o"}
# The Debian packages of each runtime: the distribution's, Docker's, and pkgs.k8s.io's CRI-O.
PACKAGES = {"containerd": "containerd", "containerd.io": "containerd", "cri-o": "cri-o"}
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+~_-]{0,63}")


def here(root: str, path: str, links: bool = True) -> str:
    """Where the node's `path` is from here: the one way assess reaches a node path. The path is
    normalised as an absolute path first (`..` stops at the node's /), then resolved under the
    root with the node's own links taken as a chroot takes them (options.located); `links`
    False for the root's /proc, whose links are the kernel's, not the node's. A process's root
    is a root of its own: `here(here(root, "/proc/PID/root", links=False), path)`, so that
    nothing a process names leaves it. UsageError when the result is not under the root."""
    normal = posixpath.normpath("/" + path)
    return options.located(root, normal) if links else options.under(root, normal)


def read_json(path: str) -> dict[str, Any] | None:
    """A JSON object from a file here: bounded, no final symlink followed; None otherwise."""
    try:
        data = fsutil.read_at(None, path, MAX_CONF)
        value = json.loads(data) if data is not None else None
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


# --- the runtime -------------------------------------------------------------------------------


def given(value: str) -> Runtime:
    """The runtime as the kubelet reports it (`containerd://2.1.6`, `cri-o://1.36.3`): the CRI
    Version's runtime_name and runtime_version, joined by `://` (node.status.nodeInfo).
    UsageError for anything else."""
    name, sep, version = value.partition("://")
    if not sep or not name or not _VERSION.fullmatch(version):
        raise UsageError(f"--runtime {value!r}: not NAME://VERSION (e.g. containerd://2.1.6)")
    return Runtime(CRI_NAMES.get(name), version, f"--runtime {name}://{version}", name)


def packaged(root: str, tried: list[str]) -> Runtime | None:
    """The runtime installed by a Debian package (the first of PACKAGES installed), its version
    without the epoch and the Debian revision (`1:1.6.20~ds1-1+b1` -> `1.6.20~ds1`, what the
    runtime itself reports)."""
    try:
        data = fsutil.read_at(None, here(root, DPKG_STATUS), MAX_DPKG)
    except (OSError, UsageError) as exc:
        tried.append(f"{DPKG_STATUS}: {exc}")
        return None
    if data is None:
        tried.append(f"{DPKG_STATUS}: none")
        return None
    found: dict[str, str] = {}
    for stanza in data.decode("utf-8", "replace").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line)
        package, version = fields.get("Package"), fields.get("Version", "")
        if package in PACKAGES and fields.get("Status", "").endswith(" installed"):
            found[package] = version
    for package, runtime in PACKAGES.items():
        if package in found:
            version = found[package].partition(":")[2] or found[package]
            version = version.rpartition("-")[0] or version
            if _VERSION.fullmatch(version):
                return Runtime(runtime, version, f"package {package} {found[package]} "
                               f"({DPKG_STATUS})", runtime)
    tried.append(f"{DPKG_STATUS}: no {', '.join(PACKAGES)} package installed")
    return None


def pids(root: str, comm: str) -> list[int]:
    """The PIDs of the processes named `comm` in the root's /proc, lowest first."""
    try:
        proc = here(root, "/proc", links=False)
        numbers = sorted(int(n) for n in os.listdir(proc) if n.isdigit())
    except (OSError, UsageError):
        return []
    out = []
    for pid in numbers:
        try:
            name = fsutil.read_regular(None, f"{proc}/{pid}/comm", 64).data.strip()
        except (OSError, ValueError):
            continue
        if name.decode(errors="replace") == comm:
            out.append(pid)
    return out


# --- what sits behind the guard ----------------------------------------------------------------


def behind(node: Node, found: Found, multus_version: str | None) -> None:
    """Fill `found` with the conf the runtime uses and what sits behind the guard in it."""
    found.conf_path = node.conf_path
    found.conf_error = node.conf_error
    conf = node.conf
    if conf is None or node.conf_path is None:
        return
    found.wrapped = node.guard is not None
    plugin: dict[str, Any] | None = None
    if node.guard is not None:
        mode = node.guard.get("mode")
        found.mode = mode if isinstance(mode, str) else "enforce"
        wrapped = node.guard.get("delegate")  # the guard's own key: the plugin it execs
        plugin = wrapped if isinstance(wrapped, dict) else None
    else:
        plugin = _unwrapped(node.conf_path, conf, found)
    if plugin is None or not isinstance(plugin.get("type"), str):
        found.notes.append("no plugin type found behind the guard")
        return
    kind = plugin["type"]
    if kind in (chains.MULTUS_THIN, chains.MULTUS_THICK):
        found.behind = _multus(node, plugin, kind, found, multus_version)
    else:
        # the conf's plugins as the runtime runs them: the guard's entry is its delegate
        plain = patch.unwrap(conf, confdir.is_list(node.conf_path)) or conf
        found.behind = chains.Behind(kind, plugins=tuple(_types(plain)))


def _unwrapped(path: str, conf: dict[str, Any], found: Found) -> dict[str, Any] | None:
    """The plugin the installer would wrap: multus when the conf has one, else the first."""
    plugins = conf.get("plugins") if confdir.is_list(path) else [conf]
    entries = [p for p in plugins if isinstance(p, dict)] if isinstance(plugins, list) else []
    multus = [p for p in entries if p.get("type") in confdir.MULTUS_TYPES]
    if len(multus) == 1:
        return multus[0]
    if entries:
        found.notes.append(f"not multus: {entries[0].get('type')!r}, the conf's first plugin, "
                           "is what `install --wrap` would guard")
        return entries[0]
    return None


def _types(conf: object) -> list[str]:
    """The plugin types of a conf or conflist (an entry of multus's `delegates`, a file)."""
    if not isinstance(conf, dict):
        return []
    plugins = conf.get("plugins")
    entries = plugins if isinstance(plugins, list) else [conf]
    return [str(p["type"]) for p in entries if isinstance(p, dict) and isinstance(
        p.get("type"), str)]


def _multus(node: Node, plugin: dict[str, Any], kind: str, found: Found,
            version: str | None) -> chains.Behind:
    form, network = chains.form_of(plugin)
    config_file = None
    if kind == chains.MULTUS_THICK:
        config_file = _daemon_config_file(node, found)
    plugins: list[str] = []
    if form == chains.INLINE:
        for entry in plugin.get("delegates", []):
            plugins += _types(entry)
    elif form == chains.PATH and network is not None:
        plugins = _types(_network_file(node, network, found))
    elif form == chains.NAME and network is not None:
        plugins = _types(_named_network(node, network, found))
    found.multus_version_from = "--multus-version" if version else ""
    return chains.Behind(kind, form, network, config_file, version, tuple(plugins))


def _network_file(node: Node, network: str, found: Found) -> dict[str, Any] | None:
    """The conf `clusterNetwork` names by path: where it says under the root, else (the path as
    multus thick's daemon sees it, /host/etc/cni/net.d/...) its name in the conf dir, as auto
    mode finds it there."""
    where = _here_or_none(node.root, network)
    for path in (where, os.path.join(node.conf_dir, os.path.basename(network))):
        if path and (conf := read_json(path)) is not None:
            if path != where:
                found.notes.append(f"clusterNetwork {network} read as {path} (the daemon's view "
                                   "of the conf dir)")
            return conf
    found.notes.append(f"clusterNetwork {network}: not readable on the node")
    return None


def _named_network(node: Node, name: str, found: Found) -> dict[str, Any] | None:
    """A conf file of the conf dir whose network name is `name` (what multus falls back to when
    no NetworkAttachmentDefinition of that name exists: k8sclient.go option 2)."""
    try:
        names = confdir.conf_files(node.conf_dir)
    except (OSError, ValueError):
        names = []
    for name_ in names:
        conf = read_json(os.path.join(node.conf_dir, name_))
        if conf is not None and conf.get("name") == name:
            return conf
    found.notes.append(f"clusterNetwork {name!r}: no conf of that name in the conf dir (a "
                       "NetworkAttachmentDefinition, which the node does not show)")
    return None


def _here_or_none(root: str, path: str) -> str | None:
    try:
        return here(root, path)
    except UsageError:
        return None


def _daemon_config_file(node: Node, found: Found) -> str | None:
    """thick's `multusConfigFile` ("auto" or a path): the daemon config under the conf dir
    where the node has it, else the running daemon's `-config` inside that process's root."""
    paths: list[str | None] = [os.path.join(node.conf_dir, multusdaemon.DAEMON_CONFIG)]
    for pid in pids(node.root, "multus-daemon"):
        config = _daemon_flag(node.root, pid) or "/etc/cni/net.d/" + multusdaemon.DAEMON_CONFIG
        inside = here(node.root, f"/proc/{pid}/root", links=False)
        paths.append(_here_or_none(inside, config))
    for path in paths:
        conf = read_json(path) if path else None
        if conf is not None:
            value = conf.get("multusConfigFile", "auto")  # its default (config.go:75)
            return value if isinstance(value, str) else None
    found.notes.append("multus thick's daemon config not readable on the node "
                       "(multusConfigFile unknown)")
    return None


def _daemon_flag(root: str, pid: int) -> str | None:
    """The daemon's `-config`/`--config` value from its cmdline."""
    try:
        raw = fsutil.read_regular(None, here(root, f"/proc/{pid}/cmdline", links=False),
                                  65536).data
    except (OSError, ValueError, UsageError):
        return None
    args = raw.decode(errors="replace").split("\0")
    for i, arg in enumerate(args):
        for flag in ("-config", "--config"):
            if arg == flag and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return None
