"""`cni-delguard list` and `stats --prometheus`, checked against the markers and log they read.

The Prometheus text is parsed with prometheus-client's own parser, as a collector would read it.
"""

from __future__ import annotations

import io
import json
import os
import stat
import time

from prometheus_client.parser import text_string_to_metric_families

from cni_delguard import cli
from cni_delguard.monitoring import metrics, series
from tests.support.nodestate import log_lines, marker

# Ages are planted when a test runs, never at import (collection comes minutes earlier).
POD = {"namespace": "ns1", "name": "web-0", "uid": "5b1c-uid"}


def _plant(state):
    marker(state, "net1", "c1", "attempted", time.time() - 7200, pod=POD)
    marker(state, "net1", "c2", "completed", time.time() - 60)
    marker(state, "net2", "c3", "attempted", time.time() - 30, ifname="net1")
    marker(state, "net2", "c4", "deleting", time.time() - 5)
    (state / "networks" / "net2" / "c5:eth0.json").write_bytes(b"\x00torn")


def _run(*argv):
    out, err = io.BytesIO(), io.StringIO()
    code = cli.main(list(argv), {}, io.BytesIO(), out, err)
    return code, out.getvalue().decode(), err.getvalue()


def test_list_json_matches_the_markers(tmp_path):
    state = tmp_path / "state"
    _plant(state)
    code, out, _ = _run("list", "--state-dir", str(state), "--json")
    assert code == 0
    rows = {(r["network"], r["containerID"] or r["path"].rsplit("/", 1)[1]): r
            for r in json.loads(out)}
    assert {k: r["state"] for k, r in rows.items()} == {
        ("net1", "c1"): "attempted",
        ("net1", "c2"): "completed",
        ("net2", "c3"): "attempted",
        ("net2", "c4"): "deleting",
        ("net2", "c5:eth0.json"): "corrupt",
    }
    assert rows[("net1", "c1")]["pod"] == POD
    assert rows[("net1", "c2")]["pod"] is None
    assert rows[("net2", "c3")]["ifname"] == "net1"
    assert 7190 <= rows[("net1", "c1")]["ageSeconds"] <= 7200 + 600


def test_list_table_shows_pod_and_age(tmp_path):
    state = tmp_path / "state"
    _plant(state)
    code, out, _ = _run("list", "--state-dir", str(state))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NETWORK", "CONTAINER", "IFNAME", "STATE", "AGE", "POD"]
    assert lines[1].split() == ["net1", "c1", "eth0", "attempted", "2h", "ns1/web-0"]
    assert len(lines) == 6


def test_list_without_a_state_dir_and_with_an_unsafe_one(tmp_path):
    code, out, _ = _run("list", "--state-dir", str(tmp_path / "none"))
    assert code == 0 and "no markers" in out
    unsafe = tmp_path / "unsafe"
    unsafe.mkdir()
    unsafe.chmod(0o777)
    code, out, err = _run("list", "--state-dir", str(unsafe))
    assert code == 2 and "writable by group or others" in err and err.count("\n") == 1


def _families(path):
    return {f.name: f for f in text_string_to_metric_families(path.read_text())}


def _value(fam, **labels):
    found = [s.value for s in fam.samples if s.labels == labels and not s.name.endswith("_created")]
    assert len(found) == 1, (fam.name, labels, fam.samples)
    return found[0]


def test_prometheus_file_matches_markers_and_log(tmp_path):
    state, log, prom = tmp_path / "state", tmp_path / "delguard.log", tmp_path / "dg.prom"
    _plant(state)
    err7 = {"code": 7, "msg": "server_socket is required"}
    log_lines(log, [
        {"command": "ADD", "decision": "add-completed"},
        {"command": "DEL", "decision": "skip"},
        {"command": "DEL", "decision": "skip"},
        {"command": "DEL", "decision": "forward-lenient", "delegateError": err7},
        {"command": "DEL", "decision": "forward-lenient"},
        {"command": "DEL", "decision": "released", "delegateError": err7},
        {"command": "DEL", "decision": "observe", "wouldDecide": "skip", "wouldFree": True},
        {"command": "DEL", "decision": "observe", "wouldDecide": "forward-strict"},
        {"command": "DEL\n", "decision": 'x"} 1\nevil 2'},
    ])
    with log.open("a") as f:
        f.write("garbage\n")
    os.umask(0o077)  # the file's mode must not depend on the umask
    code, out, _ = _run("stats", "--log-file", str(log), "--state-dir", str(state),
                        "--prometheus", str(prom))
    os.umask(0o022)
    assert code == 0 and out == f"wrote {prom}\n"
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    fams = _families(prom)
    # prometheus-client names a counter family without its _total suffix
    decisions = fams["cni_delguard_decisions"]
    assert decisions.type == "counter"
    assert _value(decisions, command="DEL", decision="skip") == 2
    assert _value(decisions, command="DEL", decision="forward-lenient") == 2
    assert _value(decisions, command="DEL", decision="released") == 1
    assert _value(decisions, command="DEL", decision="observe") == 2
    assert _value(decisions, command="ADD", decision="add-completed") == 1
    assert _value(decisions, command="other", decision="other") == 1
    assert _value(fams["cni_delguard_deadlock_breaks"]) == 2
    assert _value(fams["cni_delguard_observe_would_skip"]) == 1
    assert _value(fams["cni_delguard_observe_would_free"]) == 1
    assert _value(fams["cni_delguard_log_malformed_lines"]) == 1
    markers = fams["cni_delguard_markers"]
    assert {s.labels["state"]: s.value for s in markers.samples} == {
        "attempted": 2, "completed": 1, "deleting": 1, "corrupt": 1
    }
    oldest = _value(fams["cni_delguard_oldest_attempted_age_seconds"])
    assert 7190 <= oldest <= 7200 + 600
    assert _value(fams["cni_delguard_log_readable"]) == 1
    assert _value(fams["cni_delguard_state_readable"]) == 1


def test_prometheus_without_log_or_state_still_writes_valid_text(tmp_path):
    prom = tmp_path / "dg.prom"
    prom.write_text("old")
    metrics.write(str(prom), str(tmp_path / "none.log"), str(tmp_path / "none"))
    fams = _families(prom)
    assert _value(fams["cni_delguard_log_readable"]) == 0
    assert _value(fams["cni_delguard_oldest_attempted_age_seconds"]) == 0
    assert "cni_delguard_oldest_attempted_timestamp_seconds" not in fams or not (
        fams["cni_delguard_oldest_attempted_timestamp_seconds"].samples)  # none: no sample
    # Every pair a command can log, at 0: the first one logged is an increase.
    samples = fams["cni_delguard_decisions"].samples
    assert {(s.labels["command"], s.labels["decision"]) for s in samples} == set(
        series.DECISION_PAIRS)
    assert {s.value for s in samples} == {0.0}


def test_prometheus_into_a_missing_dir_is_one_line_exit_2(tmp_path):
    code, _, err = _run("stats", "--log-file", str(tmp_path / "x"), "--prometheus",
                        str(tmp_path / "no" / "dg.prom"))
    assert code == 2 and err.count("\n") == 1
