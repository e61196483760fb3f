"""Fixtures for the installer tests: a temp node root and fake one-folder bundles.

The installer runs the plugin with the node's root as / (a chroot, as root), so the node root has
a shell (tests/support/noderoot.py): the fake bundle is a /bin/sh script, as are its hooks, and
they run inside the node's root (paths in them are the node's own).

A fake bundle behaves like a frozen one-folder build where it matters: its executable keeps
reading a file from its own folder after exec, so a version dir removed or half-written under a
running plugin shows up as a failed exec; it answers CNI VERSION as the guard does (the
installer's "does it run" check). An `_internal/on-version` hook, run on VERSION, lets a test
act at the exact moment the installer checks the plugin (no real plugin shows that moment).

`helm`: the real helm of each `helm` row of peers/pins.tsv (tests/support/helm.py), for the
chart's tests; skipped when that row is not built (a failure under CI).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from cni_delguard.node.cli import main
from tests.support import helm as helmpeer
from tests.support import peers
from tests.support.noderoot import with_shell

FAKE_EXE = """#!/bin/sh
d=$(dirname "$(readlink -f "$0")")
[ -x "$d/_internal/on-version" ] && [ "$CNI_COMMAND" = VERSION ] && "$d/_internal/on-version"
[ "$CNI_COMMAND" = VERSION ] && exec echo '{"cniVersion":"1.0.0","supportedVersions":["1.0.0"]}'
exec cat "$d/_internal/version"
"""


@dataclass
class Node:
    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "opt/cni/bin"

    @property
    def net(self) -> Path:
        return self.root / "etc/cni/net.d"

    @property
    def state(self) -> Path:
        return self.root / "var/lib/cni/delguard"

    def args(self, *extra: str) -> list[str]:
        return ["--root", str(self.root), *extra]

    def write_conf(self, name: str, text: str, mode: int = 0o644) -> Path:
        path = self.net / name
        path.write_text(text, encoding="utf-8")
        path.chmod(mode)
        return path


@dataclass
class Run:
    code: int
    out: str
    err: str


def run(argv: list[str]) -> Run:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out, err)
    return Run(code, out.getvalue(), err.getvalue())


@pytest.fixture
def node(tmp_path: Path) -> Node:
    n = Node(tmp_path / "node")
    for d in (n.bin, n.net):
        d.mkdir(parents=True)
    with_shell(n.root)
    return n


def make_bundle(where: Path, version: str, filler: int = 0) -> Path:
    """A one-folder bundle whose executable prints `version` from a file in its folder."""
    (where / "_internal").mkdir(parents=True)
    exe = where / "cni-delguard"
    exe.write_text(FAKE_EXE, encoding="utf-8")
    exe.chmod(0o755)
    (where / "_internal" / "version").write_text(version, encoding="utf-8")
    if filler:
        (where / "_internal" / "filler.bin").write_bytes(os.urandom(filler))
    return where


@pytest.fixture
def bundles(tmp_path: Path) -> dict[str, Path]:
    return {v: make_bundle(tmp_path / "bundles" / v, v) for v in ("v1", "v2", "v3")}


MULTUS_CONF = """{"cniVersion":"0.3.1","name":"multus-cni-network","type":"multus",\
"capabilities":{"portMappings":true},"kubeconfig":"/etc/cni/net.d/multus.d/multus.kubeconfig",\
"delegates":[{"cniVersion":"0.3.1","name":"kube-ovn","plugins":[{"type":"kube-ovn",\
"server_socket":"/run/openvswitch/kube-ovn-daemon.sock"}]}]}"""

BRIDGE_LIST = """{
  "cniVersion": "1.0.0",
  "name": "bridge-net",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "ipam": {"type": "host-local", "subnet": "10.88.0.0/16"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
"""


@pytest.fixture(scope="session", params=helmpeer.HELMS, ids=lambda p: f"helm-{p.version}")
def helm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> helmpeer.Helm:
    peer = peers.built_or_skip(request.param.name, request.param.version)
    return helmpeer.Helm(peer, tmp_path_factory.mktemp(f"helm-{peer.version}"))
