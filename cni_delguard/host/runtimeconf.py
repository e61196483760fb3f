"""Ask the runtime: the CNI conf dir and bin dir that the node's own runtime config names.

The layout table (layouts.py) holds each distribution's defaults; where the runtime's config can
be read on the node, what it names is the truth, and the table is the fallback (`doctor` says
which was used). Read, never written:

- containerd (`/etc/containerd/config.toml`; k3s's and RKE2's `agent/etc/containerd/config.toml`
  and `config-v3.toml`; Talos's `/etc/cri/containerd.toml`): the CRI plugin's `cni` table,
  `conf_dir` and `bin_dir` (`bin_dirs`, a list, in containerd 2.1's schema: the first is where a
  plugin is put). Schema 1 names the plugin `cri`, 2 `io.containerd.grpc.v1.cri`, 3 (containerd
  2.x) `io.containerd.cri.v1.runtime`. `imports` (globs sorted, relative to the importing file)
  are loaded after the file, breadth first, and a plugin's table in a later file replaces the
  whole table of an earlier one (containerd's mergeConfig: "maps merged by keys, but values are
  replaced entirely"), so a drop-in that sets only a registry of the CRI plugin resets the CNI
  dirs to containerd's defaults. No CRI plugin table at all: the defaults, `/etc/cni/net.d` and
  `/opt/cni/bin`.
- CRI-O (`/etc/crio/crio.conf`, then `/etc/crio/crio.conf.d/*.conf` in lexical order, each key
  overriding): `[crio.network]` `network_dir` and `plugin_dirs` (the first is where a plugin is
  put); defaults the same two dirs.
- k3s with a custom `--data-dir`: its containerd config is under that dir, read from k3s's own
  `/etc/rancher/k3s/config.yaml` and `config.yaml.d/*.yaml` (the `data-dir:` key, the last file
  that sets it winning, as k3s merges them).
- MicroK8s (`/var/snap/microk8s/current/args/containerd-template.toml`): containerd's schema,
  with `${SNAP_DATA}` replaced by the revision dir `current` links to (what
  `run-containerd-with-args` substitutes: the revision's path, not `current`).

The parsing is pure (`containerd_dirs`, `crio_dirs`: dicts in, dirs out); `find` is the thin
shell that reads the files under the node's root (NodeRoot: the node's links followed inside
the root, then each file read bounded with no link at any component). A path the config names
must be absolute and hold no NUL or unresolved `${...}`, else the config is not used (the table
is).
"""

from __future__ import annotations

import glob
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cni_delguard.host.root import NodeRoot, OutsideRootError, as_root

DEFAULT_CONF_DIR, DEFAULT_BIN_DIR = "/etc/cni/net.d", "/opt/cni/bin"
_CRI_PLUGINS = {1: "cri", 2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}
_MAX_FILES = 64  # imports and drop-ins read, at most
_MAX_BYTES = 1 << 20  # a config file larger than this is not read

Doc = dict[str, Any]


@dataclass(frozen=True)
class Dirs:
    conf_dir: str
    bin_dir: str
    source: str  # "containerd /etc/containerd/config.toml", for doctor and the watcher's log


class ConfigError(ValueError):
    """A runtime config that cannot be used (unreadable TOML, a path that is not one)."""


def containerd_dirs(files: list[tuple[str, Doc]]) -> tuple[str, str]:
    """The CNI conf dir and bin dir of containerd's CRI, from its config files in load order
    (the root file first, then its imports as containerd loads them)."""
    cni: Doc | None = None
    for _, doc in files:
        version = doc.get("version", 1)
        plugins = doc.get("plugins", {})
        if not isinstance(plugins, dict):
            raise ConfigError("`plugins` is not a table")
        for key in (_CRI_PLUGINS.get(version, ""), *_CRI_PLUGINS.values()):
            if isinstance(plugins.get(key), dict):
                table = plugins[key].get("cni", {})
                cni = table if isinstance(table, dict) else {}
                break
    cni = cni or {}
    bin_dirs = cni.get("bin_dirs")
    bin_dir = cni.get("bin_dir") or (bin_dirs[0] if isinstance(bin_dirs, list) and bin_dirs
                                     else DEFAULT_BIN_DIR)
    return _path(cni.get("conf_dir") or DEFAULT_CONF_DIR), _path(bin_dir)


def crio_dirs(files: list[tuple[str, Doc]]) -> tuple[str, str]:
    """CRI-O's network_dir and first plugin_dirs entry, from crio.conf and its drop-ins in
    order (a later file's key wins)."""
    merged: Doc = {}
    for _, doc in files:
        network = doc.get("crio", {}).get("network", {})
        if isinstance(network, dict):
            merged.update(network)
    plugin_dirs = merged.get("plugin_dirs") or [DEFAULT_BIN_DIR]
    if not isinstance(plugin_dirs, list):
        raise ConfigError("crio.network.plugin_dirs is not a list")
    return _path(merged.get("network_dir") or DEFAULT_CONF_DIR), _path(plugin_dirs[0])


_DATA_DIR = re.compile(r"""^data-dir:\s*(?:"([^"]*)"|'([^']*)'|([^\s#]+))\s*(?:#.*)?$""")


def k3s_data_dir(texts: list[str]) -> str | None:
    """The `data-dir` k3s's config files set (the last one that sets it), or None."""
    found = None
    for text in texts:
        for line in text.splitlines():
            if m := _DATA_DIR.match(line):
                found = next(g for g in m.groups() if g is not None)
    return None if found is None else _path(found)


def _path(value: object) -> str:
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value or "${" in value:
        raise ConfigError(f"{value!r} is not an absolute path")
    return os.path.normpath(value)


# Where each layout's runtime keeps its config, as the node names it, first found wins:
# (kind, path). A layout not here has only the table.
_CONTAINERD, _CRIO, _MICROK8S = "containerd", "CRI-O", "MicroK8s containerd"
SOURCES: dict[str, tuple[tuple[str, str], ...]] = {
    "standard": ((_CONTAINERD, "/etc/containerd/config.toml"), (_CRIO, "/etc/crio/crio.conf")),
    "k3s": ((_CONTAINERD, "/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml"),
            (_CONTAINERD, "/var/lib/rancher/k3s/agent/etc/containerd/config.toml")),
    "rke2": ((_CONTAINERD, "/var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml"),
             (_CONTAINERD, "/var/lib/rancher/rke2/agent/etc/containerd/config.toml")),
    "microk8s": ((_MICROK8S, "/var/snap/microk8s/current/args/containerd-template.toml"),),
    "openshift": ((_CRIO, "/etc/crio/crio.conf"),),
    "talos": ((_CONTAINERD, "/etc/cri/containerd.toml"),),
}
CRIO_DROPINS = "/etc/crio/crio.conf.d"
SNAP_CURRENT = "/var/snap/microk8s/current"


K3S_CONFIG, K3S_DEFAULT_DATA = "/etc/rancher/k3s/config.yaml", "/var/lib/rancher/k3s"


def find(root: NodeRoot | str, layout: str) -> Dirs | None:
    """The dirs the layout's runtime config names under `root`; None when no config of its
    runtime is there (the table applies). ConfigError when one is there but cannot be used."""
    root = as_root(root)
    for kind, path in _sources(root, layout):
        if not os.path.isfile(root.located(path)):
            continue
        if kind == _CRIO:
            conf_dir, bin_dir = crio_dirs(_crio_files(root, path))
            extra = f" + {CRIO_DROPINS}" if root.is_dir(CRIO_DROPINS) else ""
            return Dirs(conf_dir, bin_dir, f"{kind} {path}{extra}")
        subst = _snap_data(root) if kind == _MICROK8S else None
        files = _containerd_files(root, path, subst)
        conf_dir, bin_dir = containerd_dirs(files)
        more = f" + {len(files) - 1} import(s)" if len(files) > 1 else ""
        return Dirs(conf_dir, bin_dir, f"{kind} {path}{more}")
    return None


def _sources(root: NodeRoot, layout: str) -> tuple[tuple[str, str], ...]:
    sources = SOURCES.get(layout, ())
    if layout != "k3s":
        return sources
    data_dir = k3s_data_dir(_texts(root, K3S_CONFIG, f"{K3S_CONFIG}.d", ".yaml"))
    if data_dir is None or data_dir == K3S_DEFAULT_DATA:
        return sources
    return tuple((kind, data_dir + path.removeprefix(K3S_DEFAULT_DATA)) for kind, path in sources)


def _names(root: NodeRoot, dropins: str, suffix: str) -> list[str]:
    """The drop-in files of a dir (sorted, at most _MAX_FILES) as the node names them."""
    try:
        names = sorted(n for n in os.listdir(root.located(dropins)) if n.endswith(suffix))
    except (OSError, OutsideRootError):
        names = []
    return [f"{dropins}/{n}" for n in names[:_MAX_FILES]]


def _read(root: NodeRoot, path: str) -> bytes:
    """A config file, its links followed inside the root, at most _MAX_BYTES."""
    try:
        return root.read(root.resolve(path), _MAX_BYTES)
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None


def _texts(root: NodeRoot, path: str, dropins: str, suffix: str) -> list[str]:
    """A config file and its drop-ins (sorted), as text; those that cannot be read skipped."""
    texts = []
    for each in [path, *_names(root, dropins, suffix)]:
        try:
            texts.append(_read(root, each).decode("utf-8", "replace"))
        except (ConfigError, OutsideRootError):
            continue
    return texts


def _snap_data(root: NodeRoot) -> Callable[[str], str]:
    """${SNAP_DATA} as run-containerd-with-args substitutes it: the revision's dir."""
    revision = root.resolve(SNAP_CURRENT)
    return lambda text: text.replace("${SNAP_DATA}", revision).replace("$SNAP_DATA", revision)


def _load(root: NodeRoot, path: str, subst: Callable[[str], str] | None = None) -> Doc:
    data = _read(root, path)
    try:
        text = data.decode("utf-8")
        return tomllib.loads(subst(text) if subst else text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _containerd_files(
    root: NodeRoot, path: str, subst: Callable[[str], str] | None
) -> list[tuple[str, Doc]]:
    """The root config and its imports, breadth first, each file once, as containerd loads."""
    files: list[tuple[str, Doc]] = []
    pending, loaded = [path], set()
    while pending and len(files) < _MAX_FILES:
        current = pending.pop(0)
        if current in loaded:
            continue
        loaded.add(current)
        doc = _load(root, current, subst)
        files.append((current, doc))
        imports = doc.get("imports", [])
        if not isinstance(imports, list):
            raise ConfigError(f"{current}: `imports` is not a list")
        for entry in imports:
            pending += _resolve_import(root, current, entry)
    return files


def _resolve_import(root: NodeRoot, parent: str, entry: object) -> list[str]:
    if not isinstance(entry, str) or "\0" in entry:
        raise ConfigError(f"{parent}: import {entry!r} is not a path")
    path = os.path.normpath(entry if entry.startswith("/")
                            else os.path.join(os.path.dirname(parent), entry))
    if "*" not in path:
        return [path]
    head = root.resolve(os.path.dirname(path))
    matches = sorted(glob.glob(os.path.join(glob.escape(root.here(head)),
                                            os.path.basename(path))))
    return [found for m in matches if os.path.isfile(m)
            and (found := root.on_node(m)) is not None]


def _crio_files(root: NodeRoot, path: str) -> list[tuple[str, Doc]]:
    files = [(path, _load(root, path))]
    for each in _names(root, CRIO_DROPINS, ".conf"):
        files.append((each, _load(root, each)))
    return files
