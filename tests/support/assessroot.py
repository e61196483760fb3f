"""Node roots for `cni-delguard assess`: a conf dir holding one kind of chain and the multus
binary it names.

The confs are written as their writers write them: kube-ovn's conflist as kube-ovn does
(10-kube-ovn.conflist: kube-ovn with its `server_socket`, then portmap; Cozystack's cniVersion
0.3.1); multus thin's 00-multus.conf as its thin entrypoint does (the master conflist inline in
`delegates`) or with `clusterNetwork` naming it by path or by name, the forms multus documents;
multus thick's as its daemon writes it in auto mode (pkg/server/config: the generated conf of
type multus-shim, `clusterNetwork` the conflist's path as the daemon sees it, /host/etc/cni/
net.d/..., since its DaemonSet mounts the host's conf dir there), with the daemon's config under
the conf dir (`multusConfigFile: auto`). `wrapped` puts the guard in front with the installer's
own patch.wrap. The multus binaries, where a test puts them, are the real v4.3.0 of
peers/pins.tsv: assess must find the chain with them there and run none of them. The runtime is
the caller's part (`--runtime`, or a dpkg status file under the root).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cni_delguard.node import patch

CONF_DIR, BIN_DIR = "/etc/cni/net.d", "/opt/cni/bin"
KUBE_OVN_FILE = "10-kube-ovn.conflist"
KUBE_OVN = {"name": "kube-ovn", "cniVersion": "0.3.1", "plugins": [
    {"type": "kube-ovn", "server_socket": "/run/openvswitch/kube-ovn-daemon.sock"},
    {"type": "portmap", "capabilities": {"portMappings": True}}]}
THIN = {"cniVersion": "0.3.1", "name": "multus-cni-network", "type": "multus",
        "kubeconfig": "/etc/cni/net.d/multus.d/multus.kubeconfig"}
THICK = {"cniVersion": "0.3.1", "name": "kube-ovn", "type": "multus-shim",
         "logLevel": "verbose", "daemonSocketDir": "/run/multus",
         "capabilities": {"portMappings": True}}
DAEMON_CONFIG = {"cniVersion": "0.3.1", "logLevel": "verbose", "multusConfigFile": "auto",
                 "multusAutoconfigDir": "/host/etc/cni/net.d",
                 "cniConfigDir": "/host/etc/cni/net.d", "socketDir": "/run/multus"}


@dataclass(frozen=True)
class Chain:
    """One kind of chain as a node's conf dir holds it."""

    name: str  # the test id
    kind: str  # chains.KINDS' name assess must find
    multus: str | None  # the multus binary the conf runs ("multus", "multus-shim")
    plugins: tuple[str, ...]  # the plugin types assess must find behind multus (or the conf)

    def files(self) -> dict[str, dict[str, Any]]:
        """The conf dir's files (name -> JSON), the conf the runtime uses first by name."""
        kube_ovn = {KUBE_OVN_FILE: KUBE_OVN}
        if self.name == "plain":
            return kube_ovn
        if self.name == "thin-inline":
            return {"00-multus.conf": {**THIN, "delegates": [KUBE_OVN]}, **kube_ovn}
        if self.name == "thin-path":
            return {"00-multus.conf": {**THIN, "clusterNetwork": f"{CONF_DIR}/{KUBE_OVN_FILE}"},
                    **kube_ovn}
        if self.name == "thin-name":
            return {"00-multus.conf": {**THIN, "clusterNetwork": "kube-ovn"}, **kube_ovn}
        if self.name == "thick-auto":
            return {"00-multus.conf": {**THICK, "clusterNetwork":
                                       f"/host{CONF_DIR}/{KUBE_OVN_FILE}"},
                    "multus.d/daemon-config.json": DAEMON_CONFIG, **kube_ovn}
        raise ValueError(self.name)


CHAINS = (
    Chain("thin-inline", "multus-thin-inline", "multus", ("kube-ovn", "portmap")),
    Chain("thin-path", "multus-thin-path", "multus", ("kube-ovn", "portmap")),
    Chain("thick-auto", "multus-thick-path", "multus-shim", ("kube-ovn", "portmap")),
    Chain("plain", "plain", None, ("kube-ovn", "portmap")),
)
# A kind the matrix never ran: assess must say unmeasured (a network's name is not looked up).
THIN_NAME = Chain("thin-name", "multus-thin-name", "multus", ())
BY_NAME = {c.name: c for c in (*CHAINS, THIN_NAME)}


def write(root: Path, chain: Chain, wrapped: bool, multus_bin: Path | None = None) -> Path:
    """The chain's conf dir (and multus binary) under `root`; the conf the runtime uses."""
    conf_dir = root / CONF_DIR.lstrip("/")
    bin_dir = root / BIN_DIR.lstrip("/")
    bin_dir.mkdir(parents=True, exist_ok=True)
    first = None
    for name, body in chain.files().items():
        path = conf_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        content = body
        if first is None:
            first = path
            if wrapped:
                wrap_type = chain.multus or body["plugins"][0]["type"]
                content = patch.wrap(body, name.endswith(".conflist"), wrap_type, {})
        path.write_text(json.dumps(content, indent=1) + "\n", encoding="utf-8")
    if chain.multus is not None and multus_bin is not None:
        shutil.copy2(multus_bin, bin_dir / chain.multus)
    assert first is not None
    return first
