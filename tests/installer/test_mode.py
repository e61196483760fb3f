"""`install --mode observe|enforce`: the guard key written into the wrapped conf."""

from __future__ import annotations

import json

from cni_delguard.guard import config

from .conftest import MULTUS_CONF, run


def test_observe_is_written_and_enforce_switches_back(node, bundles):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    # The first install puts the plugin in: a wrap needs a guard that runs (--no-bundle later).
    r = run(["install", *node.args("--bundle-dir", str(bundles["v1"]), "--mode", "observe")])
    assert r.code == 0, r.err
    conf = json.loads(path.read_text())
    assert conf["mode"] == "observe"
    assert config.validate_plugin_conf(conf, "multus-cni-network", "1.0.0").mode == "observe"
    # Installing again without --mode keeps what the conf says.
    assert run(["install", *node.args("--no-bundle")]).code == 0
    assert json.loads(path.read_text())["mode"] == "observe"
    assert run(["install", *node.args("--no-bundle", "--mode", "enforce")]).code == 0
    assert json.loads(path.read_text())["mode"] == "enforce"


def test_an_unknown_mode_is_a_usage_error(node):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    r = run(["install", *node.args("--no-bundle", "--mode", "lenient")])
    assert r.code == 2
    assert path.read_text() == MULTUS_CONF
