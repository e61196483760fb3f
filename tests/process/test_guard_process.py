"""The guard run as a process, exec'd the way a runtime execs it: the package and the frozen
binary (the product) through the same cases. Against the labelled fake delegate for the DEL
decision table, and against Debian's bridge + host-local in real network namespaces."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support import guard, netns
from tests.support.confs import guard_conf, stale_delegate
from tests.support.fakes import install_fake
from tests.support.records import fake_calls, guard_log

MODES = ["package", "frozen"]


@pytest.fixture(params=MODES)
def bin_dir(request, tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DELGUARD_UNDER_TEST", request.param)
    if request.param == "frozen":
        guard.frozen_or_skip()
    d = tmp_path / "bin"
    d.mkdir()
    guard.install_guard(d)
    install_fake(d)
    for plugin in ("bridge", "host-local", "loopback"):
        if os.path.exists(f"/usr/lib/cni/{plugin}"):
            (d / plugin).symlink_to(f"/usr/lib/cni/{plugin}")
    return d


run = guard.exec_cni


def guard_files(tmp_path):
    """The guard's files under tmp_path (keys of tests/support/confs.guard_plugin)."""
    return {
        "state_dir": tmp_path / "state",
        "log_file": tmp_path / "log",
        "result_cache_dirs": [tmp_path / "results"],
        "multus_cache_dirs": [],
    }


def fake_conf(tmp_path, **delegate):
    fake = stale_delegate(tmp_path / "fake", tmp_path / "calls", **delegate)
    return guard_conf(fake, **guard_files(tmp_path))


def calls(tmp_path):
    return [c["command"] for c in fake_calls(tmp_path / "calls")]


def last_decision(tmp_path):
    return guard_log(tmp_path / "log")[-1]["decision"]


def test_version(bin_dir):
    code, out = run(bin_dir, "VERSION", b"")
    assert code == 0
    assert "1.1.0" in out["supportedVersions"]


def test_del_without_evidence_is_answered_without_the_delegate(bin_dir, tmp_path):
    assert run(bin_dir, "DEL", fake_conf(tmp_path)) == (0, None)
    assert calls(tmp_path) == []
    assert last_decision(tmp_path) == "skip"


def test_interrupted_add_then_failing_del_succeeds(bin_dir, tmp_path):
    conf = fake_conf(tmp_path, hang=["ADD"], hangSeconds=30)
    conf["timeouts"] = {"add": 1}
    code, out = run(bin_dir, "ADD", conf)
    assert code == 1 and out["code"] == 11
    assert run(bin_dir, "DEL", fake_conf(tmp_path)) == (0, None)
    assert calls(tmp_path) == ["ADD", "DEL", "DEL"]  # cleanup DEL after the failed ADD, then ours
    assert last_decision(tmp_path) == "forward-lenient"
    assert run(bin_dir, "DEL", fake_conf(tmp_path)) == (0, None)
    assert last_decision(tmp_path) == "skip"


def test_every_delegate_call_logs_its_time_a_failed_add_too(bin_dir, tmp_path):
    """The watcher's cni_delguard_delegate_seconds and _errors_total are folded from these
    fields: a timed-out ADD and a failing strict DEL must carry them as a success does. A skip
    calls nothing and says no delegate time."""
    conf = fake_conf(tmp_path, hang=["ADD"], hangSeconds=30)
    conf["timeouts"] = {"add": 1}
    assert run(bin_dir, "ADD", conf)[0] == 1  # timed out after 1 s
    assert run(bin_dir, "DEL", fake_conf(tmp_path, failDel=42))[0] == 0  # lenient: a break
    assert run(bin_dir, "ADD", fake_conf(tmp_path))[0] == 0
    assert run(bin_dir, "DEL", fake_conf(tmp_path, failDel=42))[0] == 1  # strict: reported
    assert run(bin_dir, "DEL", fake_conf(tmp_path))[0] == 0
    assert run(bin_dir, "DEL", fake_conf(tmp_path)) == (0, None)  # nothing left: a skip
    lines = [(r["command"], r["decision"], r.get("delegateMs"), r.get("delegateExit"),
              "error" in r or "delegateError" in r) for r in guard_log(tmp_path / "log")]
    assert [ln[:2] for ln in lines] == [
        ("ADD", "add-failed"), ("DEL", "forward-lenient"), ("ADD", "add-completed"),
        ("DEL", "forward-strict"), ("DEL", "forward-strict"), ("DEL", "skip")]
    assert [ln[4] for ln in lines] == [True, True, False, True, False, False]
    assert 1000 <= lines[0][2] < 30000  # the ADD's timeout, not the whole call's time
    assert lines[0][3] == -9  # killed at its timeout (SIGKILL)
    assert [ln[3] for ln in lines[1:5]] == [1, 0, 1, 0]  # its exit status (code 42 in its JSON)
    assert all(isinstance(ln[2], float) and 0 <= ln[2] < 30000 for ln in lines[1:5])
    assert lines[5][2] is None


def test_completed_add_then_failing_del_is_propagated(bin_dir, tmp_path):
    assert run(bin_dir, "ADD", fake_conf(tmp_path))[0] == 0
    code, out = run(bin_dir, "DEL", fake_conf(tmp_path, failDel=42))
    assert code == 1
    assert out == {
        "cniVersion": "1.0.0",
        "code": 42,
        "msg": "fake delegate: DEL refused",
        "details": "",
    }
    assert run(bin_dir, "DEL", fake_conf(tmp_path)) == (0, None)
    assert calls(tmp_path) == ["ADD", "DEL", "DEL"]
    assert sorted(os.listdir(tmp_path / "state" / "networks" / "net1")) == []


@pytest.mark.parametrize("odd", ["mis-moded", "symlink"])
def test_gc_skips_a_network_dir_that_is_not_the_guards_and_still_forwards(bin_dir, tmp_path, odd):
    """The one rule (store.network_dirs): a network dir that is not the guard's own is never
    read or written through, by GC as by the operator's tools; the delegate's GC still runs."""
    conf = fake_conf(tmp_path) | {"cniVersion": "1.1.0"}
    assert run(bin_dir, "ADD", conf)[0] == 0
    net = tmp_path / "state" / "networks" / "net1"
    if odd == "mis-moded":
        net.chmod(0o777)
    else:
        net.rename(tmp_path / "moved")
        net.symlink_to(tmp_path / "moved")
    gc = conf | {"cni.dev/valid-attachments": []}
    assert run(bin_dir, "GC", gc) == (0, None)
    assert calls(tmp_path) == ["ADD", "GC"]
    line = guard_log(tmp_path / "log")[-1]
    assert (line["command"], line["level"], line["pruned"]) == ("GC", "warning", [])
    assert line["warning"].startswith(f"markers not pruned: state dir {net} is unusable: ")
    assert "c1:eth0.json" in os.listdir(net)  # nothing removed through it


@pytest.mark.parametrize(
    ("command", "stdin", "env", "code"),
    [
        pytest.param("ADD", b"\xff\xfe garbage", {}, 6, id="garbage-stdin"),
        pytest.param("ADD", b" " * (5 * 1024 * 1024), {}, 6, id="oversized-stdin"),
        pytest.param("ADD", None, {"CNI_CONTAINERID": "../../etc"}, 4, id="traversal-container-id"),
        pytest.param("ADD", None, {"CNI_IFNAME": "a/b"}, 4, id="bad-ifname"),
        pytest.param("FROB", None, {}, 4, id="unknown-command"),
        pytest.param("ADD", "9.9.9", {}, 1, id="unknown-version"),
    ],
)
def test_bad_input_gets_cni_error_json(bin_dir, tmp_path, command, stdin, env, code):
    conf = fake_conf(tmp_path)
    if stdin == "9.9.9":
        conf["cniVersion"] = "9.9.9"
        stdin = None
    data = stdin if stdin is not None else json.dumps(conf).encode()
    kw = {"cid": env.get("CNI_CONTAINERID", "c1"), "ifname": env.get("CNI_IFNAME", "eth0")}
    rc, out = run(bin_dir, command, data, **kw)
    assert rc != 0
    assert out["code"] == code
    assert set(out) <= {"cniVersion", "code", "msg", "details"}
    assert calls(tmp_path) == []


@pytest.mark.netns
def test_bridge_and_host_local_through_the_guard(bin_dir, tmp_path):
    if reason := netns.available():
        pytest.skip(reason)
    spaces = netns.NetnsSet(prefix="dgp")
    try:
        outer, pod = spaces.new("o"), spaces.new("p")
        leases = tmp_path / "leases"
        bridge = {
            "type": "bridge",
            "bridge": "dgpbr0",
            "isGateway": True,
            "ipam": {"type": "host-local", "subnet": "10.252.0.0/24", "dataDir": str(leases)},
        }
        conf = guard_conf(bridge, network="pnet", **guard_files(tmp_path))
        inside = ["ip", "netns", "exec", outer.name]
        code, result = run(bin_dir, "ADD", conf, netns_path=str(pod.path), prefix=inside)
        assert code == 0
        assert result["ips"][0]["address"].startswith("10.252.0.")
        assert pod.addresses("eth0") == [result["ips"][0]["address"]]
        assert list((leases / "pnet").glob("10.252.0.*"))
        conf["prevResult"] = result
        assert run(bin_dir, "DEL", conf, netns_path=str(pod.path), prefix=inside) == (0, None)
        assert not list((leases / "pnet").glob("10.252.0.*"))
        assert "eth0" not in pod.links()
        assert last_decision(tmp_path) == "forward-strict"
        assert run(bin_dir, "DEL", conf, netns_path=str(pod.path), prefix=inside) == (0, None)
    finally:
        assert spaces.close() == []
