"""cni_delguard/node/purge.py: `uninstall --purge` leaves the node's guard dirs as before the
install, and only once the conf is restored; against a temp node root."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cni_delguard.node import cli as node_cli
from cni_delguard.node import purge

from .conftest import MULTUS_CONF, run


def _installed(node, bundles):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    assert run(["install", *node.args("--bundle-dir", str(bundles["v1"]))]).code == 0
    net = node.state / "multus-cni-network"
    net.mkdir(mode=0o700, exist_ok=True)
    (net / "marker.json").write_text("{}")
    logs = node.root / "var/log/cni-delguard"
    logs.mkdir(parents=True)
    (logs / "delguard.log").write_text('{"command":"DEL"}\n')
    (logs / "delguard.log.1").write_text("")
    return path, logs


def _opts(node):
    args = node_cli.build_parser(None, None).parse_args(["uninstall", *node.args()])
    return node_cli.node_options(args)


def test_purge_empties_the_dirs_and_keeps_what_the_hold_reads(node, bundles):
    path, logs = _installed(node, bundles)
    original = MULTUS_CONF.encode()
    r = run(["uninstall", *node.args("--purge")])
    assert r.code == 0, r.err
    assert path.read_bytes() == original
    assert sorted(os.listdir(node.state)) == ["installer"]
    assert sorted(os.listdir(node.state / "installer")) == ["lock", "uninstalled"]
    assert os.listdir(logs) == []
    assert "purged" in r.err


def test_finish_removes_the_rest_and_the_dirs(node, bundles):
    _, logs = _installed(node, bundles)
    assert run(["uninstall", *node.args("--purge")]).code == 0
    said: list[str] = []
    purge.finish(_opts(node), said.append)
    assert not node.state.exists() and not logs.exists()
    assert node.state.parent.is_dir()  # /var/lib/cni itself is libcni's: left
    assert any("removed" in s for s in said)


def test_no_purge_while_a_conf_still_names_the_guard(node, bundles):
    _installed(node, bundles)
    kept = node.write_conf("99-other.conf", (node.net / "00-multus.conf").read_text())
    r = run(["uninstall", *node.args("--conf-file", "00-multus.conf", "--purge")])
    assert r.code == 0, r.err
    assert kept.exists()
    assert "not purging" in r.err
    assert (node.state / "multus-cni-network" / "marker.json").exists()


def test_no_purge_after_an_install_lifted_the_uninstall(node, bundles):
    _installed(node, bundles)
    assert run(["uninstall", *node.args()]).code == 0
    assert run(["install", *node.args("--bundle-dir", str(bundles["v1"]))]).code == 0
    said: list[str] = []
    purge.finish(_opts(node), said.append)
    assert (node.state / "multus-cni-network" / "marker.json").exists()
    assert said == ["not purging: an install has lifted the uninstall since"]


@pytest.mark.parametrize("where", [
    pytest.param("state", id="link-in-the-state-dir"),
    pytest.param("log", id="link-in-the-log-dir"),
])
def test_a_link_inside_is_removed_not_followed(node, bundles, tmp_path, where):
    _, logs = _installed(node, bundles)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    d = node.state if where == "state" else logs
    (d / "link").symlink_to(outside)
    assert run(["uninstall", *node.args("--purge")]).code == 0
    assert not os.path.lexists(d / "link")
    assert (outside / "keep").read_text() == "x"


def test_a_linked_log_dir_is_refused_not_followed(node, bundles, tmp_path):
    _, logs = _installed(node, bundles)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    for p in logs.iterdir():
        p.unlink()
    logs.rmdir()
    logs.symlink_to(outside)
    r = run(["uninstall", *node.args("--purge")])
    assert r.code == 1
    assert "not purging" in r.err and "a symlink" in r.err
    assert (outside / "keep").read_text() == "x"


def test_a_purging_hold_leaves_nothing_when_it_is_stopped(node, bundles):
    """`uninstall --hold --purge` as the chart's pod runs it: emptied while it holds, gone
    when SIGTERM ends the hold (here no mount keeps the dirs themselves)."""
    _, logs = _installed(node, bundles)
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "cni_delguard", "uninstall", *node.args("--hold", "--purge")],
        cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # said once the uninstall and the first purge are done
        assert "holding until stopped" in line, line + proc.stderr.read()
        assert sorted(os.listdir(node.state)) == ["installer"] and os.listdir(logs) == []
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    assert not node.state.exists() and not logs.exists(), out + err
    assert f"purged: removed {node.state}" in out
