"""install / uninstall through the command line, against a temp node root."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from .conftest import BRIDGE_LIST, MULTUS_CONF, run


def conf_names(node):
    return sorted(os.listdir(node.net))


def test_fresh_install_wraps_in_place_and_keeps_mode(node, bundles):
    path = node.write_conf("00-multus.conf", MULTUS_CONF, mode=0o600)
    node.write_conf("10-kube-ovn.conflist", BRIDGE_LIST)
    r = run(["install", *node.args("--bundle-dir", str(bundles["v1"]))])
    assert (r.code, r.out) == (0, "")
    conf = json.loads(path.read_text())
    assert conf["type"] == "cni-delguard"
    assert conf["delegate"] == json.loads(MULTUS_CONF)
    assert path.stat().st_mode & 0o777 == 0o600
    assert conf_names(node) == ["00-multus.conf", "10-kube-ovn.conflist"]  # nothing new sorts first
    out = subprocess.run([node.bin / "cni-delguard"], capture_output=True, text=True, check=True)
    assert out.stdout == "v1"
    assert "wrapped 'multus'" in r.err


def test_second_install_changes_nothing(node, bundles):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    args = ["install", *node.args("--bundle-dir", str(bundles["v1"]))]
    assert run(args).code == 0
    before = {p: os.lstat(p) for p in (path, node.bin / "cni-delguard")}
    r = run(args)
    assert r.code == 0
    assert "unchanged" in r.err and "up to date" in r.err
    for p, st in before.items():
        assert (os.lstat(p).st_ino, os.lstat(p).st_mtime_ns) == (st.st_ino, st.st_mtime_ns)


def test_install_over_an_older_version_switches_the_binary_only(node, bundles):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    assert run(["install", *node.args("--bundle-dir", str(bundles["v1"]))]).code == 0
    wrapped = path.read_bytes()
    assert run(["install", *node.args("--bundle-dir", str(bundles["v2"]))]).code == 0
    out = subprocess.run([node.bin / "cni-delguard"], capture_output=True, text=True, check=True)
    assert out.stdout == "v2"
    assert path.read_bytes() == wrapped


@pytest.mark.parametrize(
    ("name", "text", "wrap"),
    [
        pytest.param("00-multus.conf", MULTUS_CONF, "multus", id="conf"),
        pytest.param("10-bridge.conflist", BRIDGE_LIST, "bridge", id="conflist"),
    ],
)
def test_install_then_uninstall_restores_byte_for_byte(node, bundles, name, text, wrap):
    path = node.write_conf(name, text, mode=0o640)
    original = path.read_bytes()
    r = run(["install", *node.args("--wrap", wrap, "--bundle-dir", str(bundles["v1"]))])
    assert r.code == 0, r.err
    assert path.read_bytes() != original
    r = run(["uninstall", *node.args()])
    assert r.code == 0, r.err
    assert path.read_bytes() == original
    assert path.stat().st_mode & 0o777 == 0o640
    assert os.listdir(node.bin) == []
    assert sorted(os.listdir(node.state / "installer")) == ["lock", "uninstalled"]


def test_uninstall_leaves_a_conf_rewritten_by_someone_else(node, bundles):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    assert run(["install", *node.args("--bundle-dir", str(bundles["v1"]))]).code == 0
    path.write_text(MULTUS_CONF.replace("kube-ovn", "calico"))
    r = run(["uninstall", *node.args()])
    assert r.code == 0
    assert path.read_text() == MULTUS_CONF.replace("kube-ovn", "calico")
    assert os.listdir(node.bin) == []


def test_uninstall_unwraps_a_wrapped_conf_that_was_edited(node, bundles):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    assert run(["install", *node.args("--bundle-dir", str(bundles["v1"]))]).code == 0
    conf = json.loads(path.read_text())
    conf["logLevel"] = "debug"
    path.write_text(json.dumps(conf))
    r = run(["uninstall", *node.args()])
    assert r.code == 0
    assert json.loads(path.read_text()) == json.loads(MULTUS_CONF)
    assert "not byte-identical" in r.err


def test_uninstall_keeps_the_binary_while_another_conf_uses_it(node, bundles):
    node.write_conf("00-multus.conf", MULTUS_CONF)
    node.write_conf("10-master.conflist", BRIDGE_LIST)
    node.write_conf("20-bridge.conflist", BRIDGE_LIST)
    v1 = str(bundles["v1"])
    assert run(["install", *node.args("--bundle-dir", v1)]).code == 0
    bridge = ["--conf-file", "20-bridge.conflist", "--wrap", "bridge"]
    assert run(["install", *node.args("--bundle-dir", v1, *bridge)]).code == 0
    r = run(["uninstall", *node.args("--conf-file", "00-multus.conf")])
    assert r.code == 0
    assert "still used by 20-bridge.conflist" in r.err
    assert (node.bin / "cni-delguard").exists()


def test_dry_run_prints_the_diff_and_changes_nothing(node, bundles):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    r = run(["install", *node.args("--bundle-dir", str(bundles["v1"]), "--dry-run")])
    assert r.code == 0
    assert r.out.startswith(f"--- a{path}\n+++ b{path}\n")
    assert '+  "type": "cni-delguard",' in r.out
    assert path.read_text() == MULTUS_CONF
    assert os.listdir(node.bin) == []
    assert not node.state.exists()


def test_guard_keys_are_written(node, bundles):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    args = ["--log-level", "debug", "--log-file", "", "--state-dir", "/var/lib/dg"]
    r = run(["install", *node.args("--bundle-dir", str(bundles["v1"]), *args)])
    assert r.code == 0, r.err
    conf = json.loads(path.read_text())
    assert (conf["logLevel"], conf["logFile"], conf["stateDir"]) == ("debug", "", "/var/lib/dg")
    kept = sorted(n.rsplit(".", 1)[-1] for n in os.listdir(node.root / "var/lib/dg/installer"))
    assert kept == ["json", "lock", "orig"]  # the record and the lock, under --root


def test_without_guard_keys_the_conf_gets_none(node, bundles):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    assert run(["install", *node.args("--bundle-dir", str(bundles["v1"]))]).code == 0
    conf = json.loads(path.read_text())
    assert set(conf) == {"cniVersion", "name", "type", "capabilities", "delegate"}


@pytest.mark.parametrize(
    ("name", "text", "extra", "why", "code"),
    [
        pytest.param(
            "00-multus.conf", '{"type": "multus",', [], "is not valid JSON", 3, id="bad-json"
        ),
        pytest.param(
            "00-bridge.conf",
            '{"cniVersion": "1.0.0", "name": "n", "type": "bridge"}',
            ["--wrap", "multus"],
            "plugin type is 'bridge', not 'multus'",
            3,
            id="no-such-type",
        ),
        pytest.param(
            "00-bridge.conf",
            '{"cniVersion": "1.0.0", "name": "n", "type": "bridge"}',
            [],
            "found no multus (plugin types: 'bridge'); pass --wrap TYPE",
            7,
            id="no-multus-detected",
        ),
        pytest.param(
            "10-b.conflist",
            '{"cniVersion": "1.0.0", "name": "n", "plugins": '
            '[{"type": "bridge"}, {"type": "bridge"}]}',
            ["--wrap", "bridge"],
            "2 plugins of type 'bridge'",
            3,
            id="several-candidates",
        ),
        pytest.param(
            "00-multus.conf",
            '{"cniVersion": "9.9.9", "name": "n", "type": "multus"}',
            [],
            "would be invalid: incompatible CNI versions",
            3,
            id="guard-model-refuses",
        ),
        pytest.param(
            "00-multus.conf",
            '{"type": "multus"}',
            [],
            "no string 'name' and 'cniVersion'",
            3,
            id="no-name",
        ),
        pytest.param(
            "00-multus.conf",
            '{"cniVersion": "1.0.0", "name": "bad name!", "type": "multus"}',
            [],
            "would be invalid",
            3,
            id="bad-network-name",
        ),
    ],
)
def test_refusals_are_one_line_and_change_nothing(node, bundles, name, text, extra, why, code):
    path = node.write_conf(name, text)
    r = run(["install", *node.args("--bundle-dir", str(bundles["v1"]), *extra)])
    assert r.code == code
    assert why in r.err
    assert r.err.count("\n") == 1
    assert path.read_text() == text
    assert os.listdir(node.bin) == []


def test_a_symlinked_conf_is_refused(node, bundles):
    node.write_conf("real.json.orig", MULTUS_CONF)
    os.symlink("real.json.orig", node.net / "00-multus.conf")
    r = run(["install", *node.args("--bundle-dir", str(bundles["v1"]))])
    assert r.code == 3
    assert "symlink; refusing to patch it" in r.err


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        pytest.param(
            ["install", "--bogus"], "unrecognized arguments: --bogus", id="unknown-option"
        ),
        pytest.param(["install", "--no-such-dir"], "unrecognized", id="typo"),
        pytest.param(["install"], "not running from the frozen bundle", id="not-frozen"),
        pytest.param(["frobnicate"], "invalid choice", id="unknown-command"),
    ],
)
def test_usage_errors_exit_2_with_one_line(argv, why):
    r = run(argv)
    assert r.code == 2
    assert why in r.err
    assert r.err.count("\n") == 1


def test_empty_conf_dir_is_a_clear_error(node, bundles):
    r = run(["install", *node.args("--bundle-dir", str(bundles["v1"]))])
    assert r.code == 4
    assert f"no .conf/.conflist/.json file in {node.net}" in r.err


def test_multus_master_network_is_never_wrapped(node, bundles):
    node.write_conf("00-multus.conf", MULTUS_CONF)
    master = node.write_conf("10-bridge.conflist", BRIDGE_LIST)
    args = ["--bundle-dir", str(bundles["v1"]), "--conf-file", "10-bridge.conflist"]
    r = run(["install", *node.args(*args, "--wrap", "bridge")])
    assert r.code == 3
    assert "multus reads it as its master network" in r.err
    assert master.read_text() == BRIDGE_LIST
    assert os.listdir(node.bin) == []


def test_a_conflist_after_the_master_may_be_wrapped(node, bundles):
    node.write_conf("00-multus.conf", MULTUS_CONF)
    node.write_conf("05-master.conflist", BRIDGE_LIST)
    other = node.write_conf("20-other.conflist", BRIDGE_LIST)
    r = run(
        [
            "install",
            *node.args("--bundle-dir", str(bundles["v1"]), "--conf-file", "20-other.conflist"),
            "--wrap",
            "bridge",
        ]
    )
    assert r.code == 0, r.err
    assert json.loads(other.read_text())["plugins"][0]["type"] == "cni-delguard"


@pytest.mark.parametrize(
    ("keys", "widening"),
    [
        pytest.param(["--state-dir", "/etc/dg"], None, id="state-dir-outside"),
        pytest.param(["--log-file", "/etc/profile.d/dg.sh"], None, id="log-file-outside"),
        pytest.param(["--state-dir", "/data/dg"], "state /data/", id="widened-by-the-admin"),
    ],
)
def test_a_guard_config_the_path_rule_would_refuse_is_never_written(node, bundles, keys,
                                                                     widening):
    """The guard refuses a stateDir or logFile outside its allowed places (code 7 on every
    ADD): the installer must refuse to write such a conf, unless the admin's
    cni-delguard.paths in the bin dir widens the rule for it, as it will for the guard."""
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    node.bin.mkdir(parents=True, exist_ok=True)
    if widening is not None:
        settings = node.bin / "cni-delguard.paths"
        settings.write_text(widening + "\n")
        settings.chmod(0o644)
    r = run(["install", *node.args("--bundle-dir", str(bundles["v1"]), *keys)])
    if widening is None:
        assert r.code != 0 and "outside the allowed places" in r.err
        assert path.read_text() == MULTUS_CONF
    else:
        assert r.code == 0, r.err
        assert json.loads(path.read_text())["stateDir"] == "/data/dg"
