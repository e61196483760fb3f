"""What sits behind the guard, as the matrix knows it: one row per kind of chain (pure).

A node's conf says which plugin the guard wraps (or would wrap) and, for multus, how its network
is given: `delegates` inline, `clusterNetwork` by a file's path (what thick's `multusConfigFile:
auto` writes: pkg/server/config/manager.go:202 in v4.3.0) or by a name. Each kind names the
matrix's chains that measured it (delguard_build/chains.py); a kind none measured is unmeasured.
A path and an inline list are two kinds: multus v4.3.0 re-encodes a conflist loaded by path for
DEL without the keys CNI's types lack (multus issue 1449, PR 1521), losing kube-ovn's socket.
"""

from __future__ import annotations

from dataclasses import dataclass

INLINE, PATH, NAME = "inline", "path", "name"
MULTUS_THIN, MULTUS_THICK = "multus", "multus-shim"


@dataclass(frozen=True)
class Kind:
    name: str
    label: str
    plugin: str | None  # the wrapped plugin's type; None: any plugin that is not multus
    form: str | None  # how multus is given its network (INLINE, PATH, NAME); None: any
    chains: tuple[str, ...]  # the matrix's chains that measured it (none: unmeasured)


KINDS: tuple[Kind, ...] = (
    Kind("multus-thin-inline", "multus thin, its network inline in `delegates`", MULTUS_THIN,
         INLINE, ("multus-thin",)),
    Kind("multus-thin-path", "multus thin, `clusterNetwork` a conf file's path", MULTUS_THIN,
         PATH, ("multus-thin-path",)),
    Kind("multus-thin-name", "multus thin, `clusterNetwork` a network's name", MULTUS_THIN, NAME,
         ()),
    # auto mode writes a path (v4.3.0's manager.go:202): what every measured thick chain ran
    Kind("multus-thick-path", "multus thick, `clusterNetwork` a conf file's path "
         "(`multusConfigFile: auto` writes it so)", MULTUS_THICK, PATH,
         ("multus-thick", "cozystack-multus-v4.2.3", "cozystack-multus-v4.3.0")),
    Kind("multus-thick-other", "multus thick, `clusterNetwork` not a path (a static "
         "`multusConfigFile`)", MULTUS_THICK, None, ()),
    Kind("multus-thin-other", "multus thin without `delegates` or `clusterNetwork`", MULTUS_THIN,
         None, ()),
    Kind("plain", "a plugin that is not multus", None, None, ("fake-stateful",)),
)
BY_NAME = {k.name: k for k in KINDS}


@dataclass(frozen=True)
class Behind:
    """What sits behind the guard on a node, as the probe found it (None: not found)."""

    plugin: str | None  # the wrapped (or to-be-wrapped) plugin's type
    form: str | None = None  # multus: INLINE, PATH or NAME
    cluster_network: str | None = None  # multus: `clusterNetwork` as the conf gives it
    config_file: str | None = None  # multus thick: the daemon config's multusConfigFile
    multus_version: str | None = None  # "v4.3.0" where the user gives it (--multus-version)
    plugins: tuple[str, ...] = ()  # the plugin types of the network behind multus (or the conf)


def classify(behind: Behind) -> Kind | None:
    """The kind of chain (first row that fits); None when no plugin was found."""
    if behind.plugin is None:
        return None
    for kind in KINDS:
        if kind.plugin is None and behind.plugin in (MULTUS_THIN, MULTUS_THICK):
            continue
        if kind.plugin not in (None, behind.plugin):
            continue
        if kind.form is None or kind.form == behind.form:
            return kind
    return None  # unreachable while the last row takes any plugin


def form_of(conf: dict[str, object]) -> tuple[str | None, str | None]:
    """How a multus conf gives its network: (PATH or NAME, the value) for `clusterNetwork`,
    (INLINE, None) for a `delegates` list, (None, None) for neither. As multus v4.3.0 reads it:
    `clusterNetwork` wins over `delegates` (pkg/types/conf.go:506), and a value holding a "/" is
    a path, anything else a name (pkg/k8sclient/k8sclient.go:492)."""
    network = conf.get("clusterNetwork")
    if isinstance(network, str) and network:
        return (PATH if "/" in network else NAME), network
    delegates = conf.get("delegates")
    if isinstance(delegates, list) and delegates:
        return INLINE, None
    return None, None
