"""`install` sets the guard's timeouts from the node's kubelet (node/kubeletconf.py): the conf
gets the kubelet's deadlines when they are longer than the guard's defaults, and nothing when
the kubelet's config is missing, at its default or unreadable (said on stderr)."""

from __future__ import annotations

import json

import pytest

from cni_delguard.guard import config, defaults

from .conftest import MULTUS_CONF, run


def _kubelet(node, text: str) -> None:
    where = node.root / "var/lib/kubelet"
    where.mkdir(parents=True, exist_ok=True)
    (where / "config.yaml").write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    ("kubelet", "flags", "timeouts", "said"),
    [
        pytest.param("runtimeRequestTimeout: 5m\n", (), {"add": 600.0, "del": 300.0,
                     "check": 300.0, "gc": 300.0, "status": 300.0}, "add 600 s",
                     id="five-minute-kubelet"),
        pytest.param("runtimeRequestTimeout: 5m\n", ("--runtime-request-timeout", "4m"),
                     {"add": 480.0, "del": 240.0, "check": 240.0, "gc": 240.0,
                      "status": 240.0}, "from --runtime-request-timeout", id="flag-wins"),
        pytest.param("runtimeRequestTimeout: 0s\n", (), None, "the kubelet's default",
                     id="kubeadm-default"),
        pytest.param("runtimeRequestTimeout: [5m]\n", (), None, "is not a duration",
                     id="garbage"),
        pytest.param(None, (), None, "not read", id="no-kubelet-config"),
    ],
)
def test_install_writes_the_kubelets_deadlines(node, bundles, kubelet, flags, timeouts, said):
    if kubelet is not None:
        _kubelet(node, kubelet)
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    r = run(["install", *node.args("--bundle-dir", str(bundles["v1"]), *flags)])
    assert r.code == 0, r.err
    assert said in r.err
    conf = json.loads(path.read_text())
    assert conf.get("timeouts") == timeouts
    settings = config.validate_plugin_conf(conf, "multus-cni-network", "1.0.0")
    assert settings.timeouts == (timeouts or defaults.TIMEOUTS)


def test_another_kubelet_config_path(node, bundles):
    where = node.root / "etc/kubernetes/kubelet"
    where.mkdir(parents=True)
    (where / "config.json").write_text('{"runtimeRequestTimeout": "3m"}', encoding="utf-8")
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    r = run(["install", *node.args("--bundle-dir", str(bundles["v1"]), "--kubelet-config",
                                   "/etc/kubernetes/kubelet/config.json")])
    assert r.code == 0, r.err
    assert json.loads(path.read_text())["timeouts"]["add"] == 360.0


def test_a_bad_flag_changes_nothing(node):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    r = run(["install", *node.args("--no-bundle", "--runtime-request-timeout", "soon")])
    assert r.code == 2
    assert path.read_text() == MULTUS_CONF
