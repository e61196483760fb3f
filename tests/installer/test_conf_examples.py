"""conf/: every example is what the installer makes of its original, and the guard accepts it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cni_delguard.guard.config import validate_plugin_conf
from cni_delguard.host.layouts import BY_NAME
from cni_delguard.node.patch import guard_plugins

from .conftest import run

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"

EXAMPLES = [
    pytest.param("multus-thin", "00-multus.conf", "multus", id="multus-thin"),
    pytest.param("multus-thick", "00-multus.conf", "multus-shim", id="multus-thick"),
    pytest.param("bridge", "10-bridge.conflist", "bridge", id="bridge"),
    pytest.param("kube-ovn-multus", "00-multus.conf", "multus", id="kube-ovn-multus"),
    pytest.param("crio-multus", "00-multus.conf", "multus-shim", id="crio-multus"),
]
# The layout whose conf dir an example sits in (the others: standard's, /etc/cni/net.d).
LAYOUT = {"crio-multus": "openshift"}
FOUND = {"multus": "multus thin (multus)", "multus-shim": "multus thick (multus-shim)"}


def test_every_example_is_in_the_table():
    listed = {p.values[0] for p in EXAMPLES}
    assert {d.name for d in (REPO / "conf").iterdir() if d.is_dir()} == listed


@pytest.mark.parametrize(("example", "name", "wrap"), EXAMPLES)
def test_example_passes_the_guards_model(example, name, wrap):
    conf = json.loads((REPO / "conf" / example / name).read_text())
    entries = guard_plugins(conf, name.endswith(".conflist"))
    assert len(entries) == 1
    assert entries[0]["delegate"]["type"] == wrap
    settings = validate_plugin_conf(entries[0], conf["name"], conf["cniVersion"])
    assert settings.delegate_type == wrap


@pytest.mark.parametrize(("example", "name", "wrap"), EXAMPLES)
def test_installer_makes_the_example_from_the_original_and_back(node, bundles, example, name, wrap):
    """multus thin and thick are detected (no --wrap); anything else needs --wrap. The layout
    is found from where the conf sits (no --layout, no path flag)."""
    layout = BY_NAME[LAYOUT.get(example, "standard")]
    conf_dir, bin_dir = node.root / layout.conf_dir[1:], node.root / layout.bin_dirs[0][1:]
    for d in (conf_dir, bin_dir):
        d.mkdir(parents=True, exist_ok=True)
    original = (DATA / example / name).read_bytes()
    shutil.copy(DATA / example / name, conf_dir / name)
    extra = [] if wrap in FOUND else ["--wrap", wrap]
    r = run(["install", *node.args("--bundle-dir", str(bundles["v1"]), *extra)])
    assert r.code == 0, r.err
    assert (f"found {FOUND[wrap]} in {name}" if wrap in FOUND else "as --wrap says") in r.err
    assert (conf_dir / name).read_bytes() == (REPO / "conf" / example / name).read_bytes()
    assert (bin_dir / "cni-delguard").is_symlink()
    assert run(["uninstall", *node.args()]).code == 0
    assert (conf_dir / name).read_bytes() == original
