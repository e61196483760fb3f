"""What `assess` reads on the node (the I/O shell; chains.py, ranges.py and verdict.py decide).

The runtime and its version, first found wins (RUNTIME_SOURCES, in this order):
1. the CRI Version call (cri.py) on `--runtime-endpoint`, then on each socket of RUNTIMES found
   under the root: the running daemon's own answer;
2. the binary of a running runtime process (the root's /proc: its comm, its exe) run with
   `--version`, through the host floor (host/run.py), which refuses it: a binary found through a
   process is never run;
3. the binary where the runtime's packages put it (RUNTIMES' `binaries`), the same way.

What sits behind the guard: the conf the runtime uses (the first by name in the conf dir that
doctor finds through the layout: doctor.node.discover), wrapped or not; the wrapped (or the
to-be-wrapped) plugin; for multus, how its network is given (chains.form_of) and which plugins
that network holds (read from the conf, the file `clusterNetwork` names, or the conf dir's file
of that network name); multus's version from its binary (`-version`, chrooted) or its daemon's;
thick's `multusConfigFile` from the daemon config where the node has it (under the conf dir, or
the running daemon's `-config` read through /proc/PID/root). Every file is read bounded and
without following a final symlink (fsutil.read_at); nothing is written.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cni_delguard.host import run
from cni_delguard.host.root import NodeRoot, as_root
from cni_delguard.node import confdir, multusdaemon, patch
from cni_delguard.ops.assess import chains, cri
from cni_delguard.ops.assess.facts import Found, Runtime
from cni_delguard.ops.doctor.node import Node
from cni_delguard.state import fsutil
from cni_delguard.tooling import UsageError

MAX_CONF = 4 * 1024 * 1024
VERSION_TIMEOUT = 10.0  # `containerd --version` answers in milliseconds; a hung binary is cut
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class RuntimeRow:
    """One runtime: how the node shows it (variation as data)."""

    name: str  # the matrix's name
    cri_names: tuple[str, ...]  # its CRI Version runtime_name
    comm: str  # its process's name in /proc/PID/comm
    sockets: tuple[str, ...]  # its CRI socket where distributions put it
    binaries: tuple[str, ...]  # its binary where packages put it
    version: re.Pattern[str]  # the version in its `--version` output


RUNTIMES: tuple[RuntimeRow, ...] = (
    RuntimeRow(
        "containerd", ("containerd",), "containerd",
        # containerd's default; k3s's and RKE2's (agent/containerd); MicroK8s' (snap common)
        ("/run/containerd/containerd.sock", "/run/k3s/containerd/containerd.sock",
         "/var/snap/microk8s/common/run/containerd.sock"),
        ("/usr/bin/containerd", "/usr/local/bin/containerd", "/bin/containerd",
         "/var/lib/rancher/rke2/bin/containerd", "/var/lib/rancher/k3s/data/current/bin/containerd",
         "/snap/microk8s/current/bin/containerd"),
        # "containerd github.com/containerd/containerd v1.7.22 7f7fdf5f..." (its third word)
        re.compile(r"^containerd \S+ (\S+)", re.M)),
    RuntimeRow(
        "cri-o", ("cri-o",), "crio",
        ("/run/crio/crio.sock", "/var/run/crio/crio.sock"),
        ("/usr/bin/crio", "/usr/local/bin/crio"),
        # 1.36: "crio version 1.36.3"; before 1.29: a table with "Version:  1.28.1"
        re.compile(r"^(?:crio version|Version:)\s+(\S+)", re.M)),
)
BY_CRI_NAME = {n: r for r in RUNTIMES for n in r.cri_names}


# --- the runtime -------------------------------------------------------------------------------


def given(value: str) -> Runtime:
    """The runtime as the kubelet reports it (`containerd://2.1.6`, `cri-o://1.36.3`): the CRI
    Version's runtime_name and runtime_version, joined by `://` (node.status.nodeInfo).
    UsageError for anything else."""
    name, sep, version = value.partition("://")
    if not sep or not name or not re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z.+~_-]{0,63}", version):
        raise UsageError(f"--runtime {value!r}: not NAME://VERSION (e.g. containerd://2.1.6)")
    row = BY_CRI_NAME.get(name)
    return Runtime(row.name if row else None, version, f"--runtime {name}://{version}", name)


def runtime(root: str, endpoint: str | None) -> tuple[Runtime | None, list[str]]:
    """The node's runtime and version, and why each source tried before it gave none."""
    tried: list[str] = []
    for source in RUNTIME_SOURCES:
        found = source(root, endpoint, tried)
        if found is not None:
            return found, tried
    return None, tried


def _from_cri(root: str, endpoint: str | None, tried: list[str]) -> Runtime | None:
    """The endpoint given (as it is: a path here), else each table socket under the root."""
    table = [NodeRoot(root).located(s) for r in RUNTIMES for s in r.sockets]
    paths = [endpoint.removeprefix("unix://")] if endpoint else [s for s in
                                                                  dict.fromkeys(table)
                                                                  if _is_socket(s)]
    for path in paths:
        try:
            answer = cri.version(path)
        except cri.CriError as exc:
            tried.append(f"CRI Version: {exc}")
            continue
        row = BY_CRI_NAME.get(answer.runtime_name)
        return Runtime(row.name if row else None, answer.runtime_version,
                       f"CRI Version on {path} ({answer.service})", answer.runtime_name)
    return None


def _is_socket(path: str) -> bool:
    import stat

    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def _from_processes(root: str, endpoint: str | None, tried: list[str]) -> Runtime | None:
    del endpoint
    for row in RUNTIMES:
        for proc, exe in process_exes(root, row.comm):
            found = _ask_binary(proc, row, exe, tried)
            if found is not None:
                return found
    return None


def _from_binaries(root: str, endpoint: str | None, tried: list[str]) -> Runtime | None:
    del endpoint
    for row in RUNTIMES:
        for path in row.binaries:
            here = NodeRoot(root).located(path)
            if os.path.isfile(here) and os.access(here, os.X_OK):
                found = _ask_binary(root, row, here, tried)
                if found is not None:
                    return found
    return None


RUNTIME_SOURCES: tuple[Callable[[str, str | None, list[str]], Runtime | None], ...] = (
    _from_cri, _from_processes, _from_binaries)


def _ask_binary(
    root: NodeRoot | str, row: RuntimeRow, here: str, tried: list[str]
) -> Runtime | None:
    on_node = as_root(root).on_node(here) or here
    out, why = run_version(root, here, ["--version"])
    found = row.version.search(out) if out is not None else None
    if found is None:
        tried.append(f"{on_node} --version: {why or 'no version in its output'}")
        return None
    return Runtime(row.name, found.group(1), f"{on_node} --version", row.name)


def run_version(root: NodeRoot | str, here: str, args: list[str]) -> tuple[str | None, str]:
    """The output of a node binary asked its version (host/run.py: chrooted into `root`, never
    when found through a process), or (None, why)."""
    node = as_root(root)
    on_node = node.on_node(here)
    if on_node is None:
        return None, f"cannot run it: {here} is not under {node.path}"
    try:
        r = run.program(node, on_node, args, {"PATH": _PATH}, VERSION_TIMEOUT, 65536)
    except run.TimedOutError:
        return None, f"no answer within {VERSION_TIMEOUT:g} s"
    except run.NotRunError as exc:
        return None, f"cannot run it: {exc}"
    text = (r.stdout + r.stderr).decode("utf-8", "replace")
    if r.returncode != 0:
        return None, f"exit {r.returncode}"
    return text, ""


def process_exes(root: NodeRoot | str, comm: str) -> list[tuple[NodeRoot, str]]:
    """The executables of the processes named `comm` in the root's /proc, lowest PID first,
    each with the process's root it is seen through (as seen from here, in that root: which the
    host floor never runs a program of); a binary deleted since it started is left out."""
    node = as_root(root)
    found: list[tuple[NodeRoot, str]] = []
    for pid in pids(node.path, comm):
        try:
            exe = os.readlink(node.here(f"/proc/{pid}/exe"))
            proc = node.process(pid)
            here = proc.here(exe) if exe.startswith("/") else None
        except (OSError, UsageError):
            continue
        if here is not None and not exe.endswith(" (deleted)") and (proc, here) not in found:
            found.append((proc, here))
    return found


def pids(root: NodeRoot | str, comm: str) -> list[int]:
    """The PIDs of the processes named `comm` in the root's /proc, lowest first."""
    node = as_root(root)
    try:
        numbers = sorted(int(n) for n in os.listdir(node.here("/proc")) if n.isdigit())
    except OSError:
        return []
    out = []
    for pid in numbers:
        try:
            name = node.read(f"/proc/{pid}/comm", 64).strip()
        except (OSError, ValueError):
            continue
        if name.decode(errors="replace") == comm:
            out.append(pid)
    return out


# --- what sits behind the guard ----------------------------------------------------------------


def behind(node: Node, found: Found) -> None:
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
        delegate = node.guard.get("delegate")
        plugin = delegate if isinstance(delegate, dict) else None
    else:
        plugin = _unwrapped(node.conf_path, conf, found)
    if plugin is None or not isinstance(plugin.get("type"), str):
        found.notes.append("no plugin type found behind the guard")
        return
    kind = plugin["type"]
    if kind in (chains.MULTUS_THIN, chains.MULTUS_THICK):
        found.behind = _multus(node, plugin, kind, found)
    else:
        # the conf's plugins as the runtime runs them: the guard's entry is its delegate
        plain = patch.unwrap(conf, confdir.is_list(node.conf_path)) or conf
        found.behind = chains.Behind(kind, delegates=tuple(_types(plain)))


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
    """The plugin types of a conf or conflist (a delegate list's entry, a file's contents)."""
    if not isinstance(conf, dict):
        return []
    plugins = conf.get("plugins")
    entries = plugins if isinstance(plugins, list) else [conf]
    return [str(p["type"]) for p in entries if isinstance(p, dict) and isinstance(
        p.get("type"), str)]


def _multus(node: Node, plugin: dict[str, Any], kind: str, found: Found) -> chains.Behind:
    form, network = chains.form_of(plugin)
    config_file = None
    if kind == chains.MULTUS_THICK:
        config_file = _daemon_config_file(node, found)
    delegates: list[str] = []
    if form == chains.INLINE:
        for entry in plugin.get("delegates", []):
            delegates += _types(entry)
    elif form == chains.PATH and network is not None:
        delegates = _types(_network_file(node, network, found))
    elif form == chains.NAME and network is not None:
        delegates = _types(_named_network(node, network, found))
    version, source = multus_version(node, kind)
    found.multus_version_from = source
    return chains.Behind(kind, form, network, config_file, version, tuple(delegates))


def read_json(path: str) -> dict[str, Any] | None:
    """A JSON object from a node file: bounded, no final symlink followed; None otherwise."""
    try:
        data = fsutil.read_at(None, path, MAX_CONF)
        value = json.loads(data) if data is not None else None
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _network_file(node: Node, network: str, found: Found) -> dict[str, Any] | None:
    """The conf `clusterNetwork` names by path: where it says under the root, else (the path as
    multus thick's daemon sees it, /host/etc/cni/net.d/...) its name in the conf dir, as auto
    mode finds it there."""
    for here in (_under(node.root, network),
                 os.path.join(node.conf_dir, os.path.basename(network))):
        if here and (conf := read_json(here)) is not None:
            if here != _under(node.root, network):
                found.notes.append(f"clusterNetwork {network} read as {here} (the daemon's view "
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


def _under(root: str, path: str) -> str | None:
    try:
        return NodeRoot(root).located(path)
    except UsageError:
        return None


def _read_node_json(root: NodeRoot, path: str) -> dict[str, Any] | None:
    """A JSON object from a node file read through `root` (no link at any component)."""
    try:
        data = root.read(path, MAX_CONF)
        value = json.loads(data)
    except (OSError, ValueError, RecursionError, UsageError):
        return None
    return value if isinstance(value, dict) else None


_MULTUS_VERSION = re.compile(r"version:\s*(v?\d+\.\d+\.\d+[^\s(,]*)")


def multus_version(node: Node, kind: str) -> tuple[str | None, str]:
    """multus's version: its binary in the bin dir, else its daemon's (thick), run `-version`
    chrooted; (None, why) when neither tells."""
    candidates = [(node.host, os.path.join(node.bin_dir, kind))]
    if kind == chains.MULTUS_THICK:
        candidates += process_exes(node.root, "multus-daemon")
    why = []
    for root, here in candidates:
        if not os.path.isfile(here):
            continue
        out, reason = run_version(root, here, ["-version"])
        match = _MULTUS_VERSION.search(out or "")
        on_node = root.on_node(here) or here
        if match:
            return match.group(1), f"{on_node} -version"
        why.append(f"{on_node} -version: {reason or 'no version in its output'}")
    return None, "; ".join(why) or f"no {kind} binary in {node.bin_dir}"


def _daemon_config_file(node: Node, found: Found) -> str | None:
    """thick's `multusConfigFile` ("auto" or a path): the daemon config under the conf dir
    where the node has it, else the running daemon's `-config` through /proc/PID/root."""
    paths = [(node.host, node.host.on_node(node.conf_dir) or "/", multusdaemon.DAEMON_CONFIG)]
    for pid in pids(node.root, "multus-daemon"):
        config = _daemon_flag(node.root, pid) or "/etc/cni/net.d/" + multusdaemon.DAEMON_CONFIG
        # The process's root, nested: its `-config` value is normalised against it, never
        # leaving it, and read without following a link.
        paths.append((node.host.process(pid), "/", config))
    for root, base, name in paths:
        conf = _read_node_json(root, os.path.join(base, name))
        if conf is not None:
            value = conf.get("multusConfigFile", "auto")  # its default (config.go:75)
            return value if isinstance(value, str) else None
    found.notes.append("multus thick's daemon config not readable on the node "
                       "(multusConfigFile unknown)")
    return None


def _daemon_flag(root: str, pid: int) -> str | None:
    """The daemon's `-config`/`--config` value from its cmdline."""
    try:
        raw = NodeRoot(root).read(f"/proc/{pid}/cmdline", 65536)
    except (OSError, ValueError):
        return None
    args = raw.decode(errors="replace").split("\0")
    for i, arg in enumerate(args):
        for flag in ("-config", "--config"):
            if arg == flag and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return None
