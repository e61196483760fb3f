"""node/kubeletconf.py: the kubelet's runtime request timeout read from its config file, and the
guard timeouts that follow from it (never below the guard's defaults, never above its maximum)."""

from __future__ import annotations

import os

import pytest

from cni_delguard.guard import defaults
from cni_delguard.node import kubeletconf
from cni_delguard.tooling import UsageError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("2m", 120.0, id="minutes"),
        pytest.param("90s", 90.0, id="seconds"),
        pytest.param("1h2m3s", 3723.0, id="hours-minutes-seconds"),
        pytest.param("2m0s", 120.0, id="go-formatted"),
        pytest.param("1.5m", 90.0, id="fraction"),
        pytest.param("1500ms", 1.5, id="milliseconds"),
        pytest.param("0", 0.0, id="bare-zero"),
        pytest.param("0s", 0.0, id="zero-seconds"),
        pytest.param("-1m", -60.0, id="negative"),
        pytest.param("+4m", 240.0, id="plus-sign"),
        pytest.param(" 3m ", 180.0, id="spaces-around"),
        pytest.param("", None, id="empty"),
        pytest.param("garbage", None, id="garbage"),
        pytest.param("120", None, id="no-unit"),
        pytest.param("2m garbage", None, id="trailing-garbage"),
        pytest.param("2 m", None, id="space-inside"),
        pytest.param("2d", None, id="days-are-not-go"),
        pytest.param("m", None, id="unit-only"),
        pytest.param("+-2m", None, id="two-signs"),
        pytest.param("-", None, id="sign-only"),
    ],
)
def test_parse_duration_reads_go_durations(text, seconds):
    assert kubeletconf.parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("runtimeRequestTimeout: 5m\n", "5m", id="plain"),
        pytest.param("a: 1\nruntimeRequestTimeout: 0s\nb: 2\n", "0s", id="kubeadm-zero"),
        pytest.param("runtimeRequestTimeout: '5m'\n", "5m", id="single-quoted"),
        pytest.param('runtimeRequestTimeout: "5m"\n', "5m", id="double-quoted"),
        pytest.param("runtimeRequestTimeout: 5m # longer\n", "5m", id="comment"),
        pytest.param("runtimeRequestTimeout:\n", "", id="empty-value"),
        pytest.param("kind: KubeletConfiguration\n", None, id="absent"),
        pytest.param("nested:\n  runtimeRequestTimeout: 5m\n", None, id="not-top-level"),
        pytest.param("runtimeRequestTimeout: 1m\nruntimeRequestTimeout: 9m\n", None,
                     id="twice-is-ambiguous"),
        pytest.param("runtimeRequestTimeout: '5m\n", None, id="unbalanced-quote"),
        pytest.param('{"kind": "KubeletConfiguration", "runtimeRequestTimeout": "5m"}', "5m",
                     id="json"),
        pytest.param('{"runtimeRequestTimeout": 300}', None, id="json-number"),
        pytest.param('{"runtimeRequestTimeout": ', None, id="json-torn"),
        pytest.param("[1, 2]", None, id="a-list"),
    ],
)
def test_top_level_scalar(text, value):
    assert kubeletconf.top_level_scalar(text, kubeletconf.KEY) == value


@pytest.mark.parametrize(
    ("rrt", "keys"),
    [
        pytest.param(120.0, {}, id="kubelet-default-is-the-guards-default"),
        pytest.param(30.0, {}, id="shorter-never-lowers"),
        pytest.param(150.0, {"add": 300.0, "del": 150.0, "check": 150.0, "gc": 150.0,
                             "status": 150.0}, id="longer-raises-each"),
        pytest.param(2700.0, {"add": 3600.0, "del": 2700.0, "check": 2700.0, "gc": 2700.0,
                              "status": 2700.0}, id="capped-at-the-models-maximum"),
    ],
)
def test_timeouts_are_the_kubelets_deadlines_above_the_defaults(rrt, keys):
    assert kubeletconf.timeouts(rrt) == keys


def test_the_defaults_are_the_default_kubelets_deadlines():
    # The rule (docs/how-it-decides.md): no default fires before the default kubelet gives up.
    assert kubeletconf.deadlines(kubeletconf.KUBELET_DEFAULT) == defaults.TIMEOUTS


def _node(tmp_path, text: str | None, name: str = "config.yaml") -> str:
    where = tmp_path / "var/lib/kubelet"
    where.mkdir(parents=True)
    if text is not None:
        (where / name).write_text(text, encoding="utf-8")
    return str(tmp_path)


@pytest.mark.parametrize(
    ("text", "add", "said"),
    [
        pytest.param("runtimeRequestTimeout: 5m\n", 600.0, "(runtimeRequestTimeout 5m)",
                     id="five-minutes"),
        pytest.param("runtimeRequestTimeout: 90s\n", None, "runtime request timeout 90 s",
                     id="shorter-keeps-defaults"),
        pytest.param("runtimeRequestTimeout: 0s\n", None, "the kubelet's default",
                     id="kubeadm-zero-is-default"),
        pytest.param("kind: KubeletConfiguration\n", None, "no runtimeRequestTimeout",
                     id="absent-is-default"),
        pytest.param("runtimeRequestTimeout: soon\n", None, "'soon' is not a duration",
                     id="garbage"),
        pytest.param("runtimeRequestTimeout: \n", None, "'' is not a duration", id="empty"),
        pytest.param("runtimeRequestTimeout: -5m\n", None, "is not a duration", id="negative"),
        pytest.param("x:\n  runtimeRequestTimeout: 5m\n", None, "no single plain",
                     id="nested-is-not-guessed"),
        pytest.param(None, None, "not read", id="missing-file"),
        pytest.param("", None, "is empty", id="empty-file-as-the-daemonset-makes-it"),
    ],
)
def test_read_a_nodes_kubelet_config(tmp_path, text, add, said):
    root = _node(tmp_path, text)
    reading = kubeletconf.read(root, kubeletconf.CONFIG)
    assert said in reading.note
    assert reading.keys.get("timeouts", {}).get("add") == add
    if add is None:
        assert reading.keys == {}


def test_a_link_is_not_followed(tmp_path):
    root = _node(tmp_path, None)
    (tmp_path / "elsewhere.yaml").write_text("runtimeRequestTimeout: 5m\n", encoding="utf-8")
    os.symlink(tmp_path / "elsewhere.yaml", tmp_path / "var/lib/kubelet/config.yaml")
    reading = kubeletconf.read(root, kubeletconf.CONFIG)
    assert reading.keys == {} and "not read" in reading.note


def test_the_path_stays_under_the_root(tmp_path):
    root = _node(tmp_path / "node", None)
    (tmp_path / "config.yaml").write_text("runtimeRequestTimeout: 5m\n", encoding="utf-8")
    reading = kubeletconf.read(root, "/../../config.yaml")
    assert reading.keys == {} and "not read" in reading.note


@pytest.mark.parametrize(
    ("given", "add"),
    [
        pytest.param("10m", 1200.0, id="flag-wins-over-the-file"),
        pytest.param("1m", None, id="shorter-flag-keeps-defaults"),
    ],
)
def test_the_installers_flag_wins(tmp_path, given, add):
    root = _node(tmp_path, "runtimeRequestTimeout: 5m\n")
    reading = kubeletconf.read(root, kubeletconf.CONFIG, given)
    assert reading.keys.get("timeouts", {}).get("add") == add
    assert "--runtime-request-timeout" in reading.note


@pytest.mark.parametrize("given", ["", "0s", "-1m", "later"])
def test_a_flag_that_is_no_positive_duration_is_a_usage_error(tmp_path, given):
    with pytest.raises(UsageError):
        kubeletconf.read(str(tmp_path), kubeletconf.CONFIG, given)


def test_an_empty_path_reads_nothing(tmp_path):
    root = _node(tmp_path, "runtimeRequestTimeout: 5m\n")
    reading = kubeletconf.read(root, "")
    assert reading.keys == {} and "not read" in reading.note
