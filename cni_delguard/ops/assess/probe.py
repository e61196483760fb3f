"""What `assess` reads on the node (the I/O shell; chains.py and report.py decide).

It reads files and runs nothing, no node binary nor any other: a process named `containerd`
cannot get its executable run as root, and no program's output is held. It reads no process's
files (/proc) either, so no path a process names can lead it off the node. The runtime is given as
the kubelet reports it (`--runtime`), else read from its Debian package (what is installed: a
daemon not restarted since an upgrade still runs the older one); multus's version is given.
Every node file is read through the host floor (_read: NodeRoot, bounded, the node's links
resolved inside the root, then no link at any component).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from cni_delguard.host.root import NodeRoot, OutsideRootError
from cni_delguard.node import confdir, multusdaemon, patch
from cni_delguard.ops.assess import chains
from cni_delguard.ops.assess.report import Found, Runtime
from cni_delguard.ops.doctor.node import Node
from cni_delguard.tooling import UsageError

MAX_CONF, MAX_DPKG = 4 << 20, 64 << 20  # a node with thousands of packages: a few MiB
DPKG_STATUS = "/var/lib/dpkg/status"
CRI_NAMES = ("containerd", "cri-o")  # CRI Version's runtime_name of the matrix's runtimes
# The Debian packages of each runtime: the distribution's, Docker's, and pkgs.k8s.io's CRI-O.
PACKAGES = {"containerd": "containerd", "containerd.io": "containerd", "cri-o": "cri-o"}
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+~_-]{0,63}")


def _read(root: NodeRoot, path: str | None, limit: int = MAX_CONF) -> bytes:
    """The node file `path` (a node path: `..` stops at the node's /), its links resolved inside
    the root; b"" when it is not a regular file within `limit` (NodeRoot.read_or_none)."""
    try:
        return (root.read_or_none(root.resolve(path), limit) or b"") if path else b""
    except OutsideRootError:  # not absolute, or a loop of links
        return b""


def read_json(root: NodeRoot, path: str | None) -> dict[str, Any] | None:
    try:
        value = json.loads(_read(root, path) or b"null")
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def given(value: str) -> Runtime:
    """The runtime as the kubelet reports it (node.status.nodeInfo.containerRuntimeVersion: CRI
    Version's runtime_name://runtime_version); UsageError for anything else."""
    name, sep, version = value.partition("://")
    if not sep or not name or not _VERSION.fullmatch(version):
        raise UsageError(f"--runtime {value!r}: not NAME://VERSION (e.g. containerd://2.1.6)")
    return Runtime(name if name in CRI_NAMES else None, version, f"--runtime {value}", name)


def multus_version(value: str) -> str:
    if not re.fullmatch(r"v?[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+~_-]{0,32}", value):
        raise UsageError(f"--multus-version {value!r}: not a version (e.g. v4.3.0)")
    return value


def packaged(root: NodeRoot, tried: list[str]) -> Runtime | None:
    """The runtime of the first of PACKAGES installed, its version without the epoch and the
    Debian revision (`1:1.6.20~ds1-1+b1` -> `1.6.20~ds1`, what the runtime itself reports)."""
    found: dict[str, str] = {}
    for stanza in _read(root, DPKG_STATUS, MAX_DPKG).decode(errors="replace").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line)
        if fields.get("Package") in PACKAGES and fields.get("Status", "").endswith(" installed"):
            found[fields["Package"]] = fields.get("Version", "")
    for package in (p for p in PACKAGES if p in found):
        upstream = found[package].partition(":")[2] or found[package]
        version = upstream.rpartition("-")[0] or upstream
        if _VERSION.fullmatch(version):
            name = PACKAGES[package]
            return Runtime(name, version, f"package {package} {found[package]} ({DPKG_STATUS})",
                           name)
    tried.append(f"{DPKG_STATUS}: no {', '.join(PACKAGES)} package installed")
    return None


def behind(node: Node, found: Found, multus_version: str | None) -> None:
    """Fill `found` with the conf the runtime uses and what sits behind the guard in it."""
    found.conf_path, found.conf_error, conf = node.conf_path, node.conf_error, node.conf
    if conf is None or node.conf_path is None:
        return
    found.wrapped = node.guard is not None
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
    if plugin["type"] in (chains.MULTUS_THIN, chains.MULTUS_THICK):
        found.behind = _multus(node, plugin, plugin["type"], found, multus_version)
    else:  # the conf's plugins as the runtime runs them: the guard's entry is its delegate
        plain = patch.unwrap(conf, confdir.is_list(node.conf_path)) or conf
        found.behind = chains.Behind(plugin["type"], plugins=tuple(_types(plain)))


def _unwrapped(path: str, conf: dict[str, Any], found: Found) -> dict[str, Any] | None:
    """The plugin the installer would wrap: multus when the conf has one, else the first."""
    plugins = conf.get("plugins") if confdir.is_list(path) else [conf]
    entries = [p for p in plugins if isinstance(p, dict)] if isinstance(plugins, list) else []
    if len(multus := [p for p in entries if p.get("type") in confdir.MULTUS_TYPES]) == 1:
        return multus[0]
    if entries:
        found.notes.append(f"not multus: {entries[0].get('type')!r}, the conf's first plugin, "
                           "is what `install --wrap` would guard")
        return entries[0]
    return None


def _types(conf: object) -> list[str]:
    """The plugin types of a conf or conflist (an entry of multus's `delegates`, a file)."""
    plugins = conf.get("plugins") if isinstance(conf, dict) else []
    entries = plugins if isinstance(plugins, list) else [conf]
    return [p["type"] for p in entries if isinstance(p, dict) and isinstance(p.get("type"), str)]


def _multus(node: Node, plugin: dict[str, Any], kind: str, found: Found,
            version: str | None) -> chains.Behind:
    form, network = chains.form_of(plugin)
    config_file = _daemon_config_file(node, found) if kind == chains.MULTUS_THICK else None
    plugins: list[str] = []
    if form == chains.INLINE:
        for entry in plugin.get("delegates", []):
            plugins += _types(entry)
    elif form == chains.PATH and network is not None:
        plugins = _types(_network_file(node, network, found))
    elif form == chains.NAME:  # a NetworkAttachmentDefinition's, or a conf file's, network name
        found.notes.append(f"clusterNetwork {network!r}: a network's name, not read")
    found.multus_version_from = "--multus-version" if version else ""
    return chains.Behind(kind, form, network, config_file, version, tuple(plugins))


def _network_file(node: Node, network: str, found: Found) -> dict[str, Any] | None:
    """The conf `clusterNetwork` names by path: there on the node, else (the path as multus
    thick's daemon sees it, /host/etc/cni/net.d/...) its name in the conf dir, as auto mode
    finds it."""
    root, conf_dir = NodeRoot(node.root), NodeRoot(node.conf_dir)  # the conf dir as doctor has it
    if (conf := read_json(root, network)) is None:
        conf = read_json(conf_dir, "/" + os.path.basename(network))
        if conf is not None:
            found.notes.append(f"clusterNetwork {network} read as {node.conf_dir}/"
                               f"{os.path.basename(network)} (the daemon's view of the conf dir)")
    if conf is None:
        found.notes.append(f"clusterNetwork {network}: not readable on the node")
    return conf


def _daemon_config_file(node: Node, found: Found) -> str | None:
    """thick's `multusConfigFile` ("auto" or a path) from its daemon config under the conf dir,
    where the node has it. Where the daemon reads it from its pod (a ConfigMap), it is unknown:
    assess reads no process's files, so nothing a process names can take it off the node."""
    conf = read_json(NodeRoot(node.conf_dir), "/" + multusdaemon.DAEMON_CONFIG)
    if conf is None:
        found.notes.append("multus thick's daemon config not under the conf dir "
                           "(multusConfigFile unknown)")
        return None
    value = conf.get("multusConfigFile", "auto")  # its default (config.go:75)
    return value if isinstance(value, str) else None
