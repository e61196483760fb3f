"""The guard as a process (package and frozen binary) on the rows added for sandboxes that were
stuck before the guard came, and in observe mode.

- multus's cache alone (multus saves it before running any delegate and keeps it when the ADD
  fails) and a libcni cache that is not a libcni cache of a result are evidence of an attempt:
  the DEL is forwarded and a failure ignored; a valid libcni cache still forwards strictly.
- observe mode forwards every DEL as if the guard were not there: the delegate is called every
  time, its output or error comes back unchanged, and the log says what the guard would have
  decided.
"""

from __future__ import annotations

import json
import os
import subprocess

from tests.process.test_guard_process import bin_dir, calls, fake_conf, run  # noqa: F401

STALE = "server_socket is required in cni.conf"
LIBCNI = {"kind": "cniCacheV1", "containerId": "c1", "ifName": "eth0", "networkName": "net1",
          "config": "e30=", "result": {"cniVersion": "1.0.0", "interfaces": [], "ips": []}}


def decisions(tmp_path):
    return [json.loads(x) for x in (tmp_path / "log").read_text().splitlines()]


def with_multus(tmp_path, **delegate):
    conf = fake_conf(tmp_path, **delegate)
    conf["multusCacheDirs"] = [str(tmp_path / "multus")]
    (tmp_path / "multus").mkdir(exist_ok=True)
    return conf


def raw(bin_dir, plugin, command, conf, cid="c1"):  # noqa: F811
    """stdout bytes and exit code of `plugin` run the way a runtime runs it."""
    env = {"PATH": "/usr/bin:/bin", "CNI_COMMAND": command, "CNI_CONTAINERID": cid,
           "CNI_IFNAME": "eth0", "CNI_NETNS": "/proc/self/ns/net", "CNI_PATH": str(bin_dir)}
    proc = subprocess.run([str(bin_dir / plugin)], input=json.dumps(conf).encode(), env=env,
                          capture_output=True, timeout=60, check=False)
    return proc.returncode, proc.stdout


def test_multus_cache_alone_frees_the_sandbox(bin_dir, tmp_path):  # noqa: F811
    conf = with_multus(tmp_path)
    (tmp_path / "multus" / "c1").write_text('{"delegates": []}')
    assert run(bin_dir, "DEL", conf) == (0, None)
    assert calls(tmp_path) == ["DEL"]  # the delegate got its chance to clean up
    rec = decisions(tmp_path)[-1]
    assert rec["decision"] == "forward-lenient"
    assert "multus-cache" in rec["evidence"]
    assert rec["delegateError"]["msg"] == STALE


def test_an_empty_libcni_cache_is_an_attempt_a_valid_one_completion(bin_dir, tmp_path):  # noqa: F811
    results = tmp_path / "results"
    results.mkdir()
    (results / "net1-c1-eth0").write_bytes(b"")
    assert run(bin_dir, "DEL", fake_conf(tmp_path)) == (0, None)
    rec = decisions(tmp_path)[-1]
    assert (rec["decision"], rec["evidence"][0]) == ("forward-lenient", "libcni-cache-invalid")
    (results / "net1-c1-eth0").write_text(json.dumps(LIBCNI))
    code, out = run(bin_dir, "DEL", fake_conf(tmp_path))
    assert code == 1 and out["msg"] == STALE
    rec = decisions(tmp_path)[-1]
    assert (rec["decision"], rec["evidence"][0]) == ("forward-strict", "libcni-cache")
    assert calls(tmp_path) == ["DEL", "DEL"]


def observe(conf):
    return dict(conf, mode="observe")


def test_observe_calls_the_delegate_for_every_del_and_returns_its_error_unchanged(
    bin_dir, tmp_path  # noqa: F811
):
    conf = observe(with_multus(tmp_path))
    # No evidence at all: the guard would skip; observing, the delegate answers.
    direct = raw(bin_dir, "stale-delegate", "DEL", conf["delegate"] | {"cniVersion": "1.0.0",
                                                                       "name": "net1"})
    assert direct[0] == 1
    assert raw(bin_dir, "cni-delguard", "DEL", conf) == direct
    # multus's cache only: the guard would forward and ignore the failure
    (tmp_path / "multus" / "c1").write_text("{}")
    assert raw(bin_dir, "cni-delguard", "DEL", conf) == direct
    assert calls(tmp_path) == ["DEL", "DEL", "DEL"]
    recs = [r for r in decisions(tmp_path) if r["command"] == "DEL"]
    assert [(r["decision"], r["wouldDecide"], r["wouldFree"]) for r in recs] == [
        ("observe", "skip", True),
        ("observe", "forward-lenient", True),
    ]
    assert all(r["error"]["msg"] == STALE for r in recs)
    assert not (tmp_path / "state" / "networks" / "net1" / "c1:eth0.lock").exists()


def test_observe_returns_the_delegates_output_and_cleans_up_after_success(
    bin_dir, tmp_path  # noqa: F811
):
    conf = observe(fake_conf(tmp_path, delStdout="delegate-said-this"))
    assert run(bin_dir, "ADD", conf)[0] == 0
    assert raw(bin_dir, "cni-delguard", "DEL", conf) == (0, b"delegate-said-this")
    rec = decisions(tmp_path)[-1]
    assert (rec["decision"], rec["wouldDecide"]) == ("observe", "forward-strict")
    assert "wouldFree" not in rec
    assert os.listdir(tmp_path / "state" / "networks" / "net1") == []
    # A completed ADD whose DEL fails: the guard would have returned the error too.
    assert run(bin_dir, "ADD", conf)[0] == 0
    failing = observe(fake_conf(tmp_path, failDel=42))
    code, out = run(bin_dir, "DEL", failing)
    assert (code, out["code"]) == (1, 42)
    rec = decisions(tmp_path)[-1]
    assert (rec["wouldDecide"], rec["wouldFree"]) == ("forward-strict", False)
    assert calls(tmp_path) == ["ADD", "DEL", "ADD", "DEL"]
