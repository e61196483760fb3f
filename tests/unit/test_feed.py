"""ops/feed.py, the watcher's metrics: counters from what is logged while it runs, the stuck
strict DELs remembered across a restart, the log read incrementally (never again whole), and an
exposition that promtool accepts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cni_delguard.node import actions, watch
from cni_delguard.node.exporter import Plan
from cni_delguard.ops import metrics
from cni_delguard.ops.feed import WatcherFeed
from tests.support.nodestate import log_lines, marker

TS = "%Y-%m-%dT%H:%M:%SZ"
ERR7 = {"code": 7, "msg": "server_socket is required in cni.conf"}


def stamp(ago: float) -> str:
    return time.strftime(TS, time.gmtime(time.time() - ago))


def strict_failure(cid: str, ago: float) -> dict:
    return {"ts": stamp(ago), "command": "DEL", "decision": "forward-strict", "network": "net1",
            "containerID": cid, "ifname": "eth0", "error": ERR7}


def make_feed(root: Path, stuck_after: float | None = None) -> tuple[WatcherFeed, watch.Counts]:
    for d in ("etc/cni/net.d", "opt/cni/bin"):
        (root / d).mkdir(parents=True, exist_ok=True)
    opts = actions.Options(
        root=str(root), bin_dir=str(root / "opt/cni/bin"), conf_dir=str(root / "etc/cni/net.d"),
        conf_file=None,
        wrap=None, state_dir=str(root / "state"),
    )
    counts = watch.Counts()
    plan = Plan(opts, str(root / "delguard.log"), counts, stuck_after)
    return WatcherFeed(plan), counts


def value(feed: WatcherFeed, name: str, *labels: str) -> float:
    return feed.values[name][tuple(labels)]


def test_counters_count_what_is_logged_while_the_watcher_runs(tmp_path):
    log = tmp_path / "delguard.log"
    log_lines(log, [{"command": "DEL", "decision": "skip"}] * 5)  # history
    feed, counts = make_feed(tmp_path)
    feed.refresh()
    assert feed.values["decisions"] == {}
    log_lines(log, [
        {"command": "DEL", "decision": "skip"},
        {"command": "DEL", "decision": "forward-lenient", "delegateError": ERR7},
        {"command": "DEL", "decision": "released", "delegateError": ERR7},
        {"command": "ADD", "decision": "add-completed"},
    ])
    with log.open("a") as f:
        f.write("not json\n")
    counts.rewraps, counts.backoffs, counts.errors = 2, 1, 3
    feed.refresh()
    assert value(feed, "decisions", "DEL", "skip") == 1
    assert value(feed, "decisions", "ADD", "add-completed") == 1
    assert value(feed, "deadlock_breaks") == 2
    assert value(feed, "released") == 1
    assert value(feed, "log_malformed_lines") == 1
    assert value(feed, "log_readable") == 1
    assert (value(feed, "rewraps"), value(feed, "backoffs"), value(feed, "watch_errors")) == (
        2, 1, 3)
    # No conf in this node root: the ready check's answer, as `cni-delguard ready` gives it.
    assert (value(feed, "node_guarded"), value(feed, "ready_code")) == (0, 10)


def test_a_strict_del_failing_before_a_restart_is_still_stuck_after_it(tmp_path):
    log = tmp_path / "delguard.log"
    log_lines(log, [strict_failure("c1", 900), strict_failure("c1", 800),
                    strict_failure("c2", 30), strict_failure("c2", 20)])
    feed, _ = make_feed(tmp_path)
    feed.refresh()
    assert value(feed, "stuck_strict_dels") == 1  # c1: 15 minutes; c2 not yet 10
    log_lines(log, [{"ts": stamp(0), "command": "DEL", "decision": "forward-strict",
                     "network": "net1", "containerID": "c1", "ifname": "eth0"}])  # went through
    feed.refresh()
    assert value(feed, "stuck_strict_dels") == 0


def test_the_threshold_is_the_watchers_to_set(tmp_path):
    log = tmp_path / "delguard.log"
    log_lines(log, [strict_failure("c2", 30), strict_failure("c2", 20)])
    feed, _ = make_feed(tmp_path, stuck_after=10)
    feed.refresh()
    assert value(feed, "stuck_strict_dels") == 1


def test_a_rotation_between_two_refreshes_loses_no_decision(tmp_path):
    log = tmp_path / "delguard.log"
    log_lines(log, [{"command": "DEL", "decision": "skip"}])
    feed, _ = make_feed(tmp_path)
    feed.refresh()
    log_lines(log, [{"command": "DEL", "decision": "skip"}] * 2)
    os.rename(log, str(log) + ".1")
    log_lines(log, [{"command": "DEL", "decision": "skip"}] * 3)
    feed.refresh()
    assert value(feed, "decisions", "DEL", "skip") == 5


def rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def test_a_100_mib_log_is_never_read_again_by_a_refresh(tmp_path):
    log = tmp_path / "delguard.log"
    line = json.dumps({"ts": stamp(0), "command": "DEL", "decision": "skip", "network": "n",
                       "containerID": "c" * 64, "ifname": "eth0"}).encode() + b"\n"
    with log.open("wb") as f:
        f.write(line * (100 * 1024 * 1024 // len(line) + 1))
    assert log.stat().st_size >= 100 * 1024 * 1024
    feed, _ = make_feed(tmp_path)
    feed.refresh()  # a history this big is not the guard's: not read at start either
    before = rchar()
    for _ in range(10):
        feed.refresh()
    log_lines(log, [{"command": "DEL", "decision": "skip"}])
    feed.refresh()
    assert rchar() - before < 1024 * 1024  # 11 refreshes read well under 1 MiB in all
    assert value(feed, "decisions", "DEL", "skip") == 1


def promtool_or_skip() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool missing: tools/install-test-deps.sh installs Debian's prometheus")
        pytest.skip("no promtool (Debian's prometheus: tools/install-test-deps.sh)")
    return found


def promtool_check(text: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([promtool_or_skip(), "check", "metrics"], input=text,
                          capture_output=True, timeout=60, check=False)


def test_the_endpoints_and_the_textfiles_exposition_pass_promtool(tmp_path):
    state = tmp_path / "state"
    marker(state, "net1", "c1", "attempted", time.time() - 60)
    log_lines(tmp_path / "delguard.log", [])
    feed, _ = make_feed(tmp_path)
    log_lines(tmp_path / "delguard.log", [{"command": "DEL", "decision": "skip"}])
    feed.refresh()
    body, content_type = feed.render("text/plain")
    assert content_type.startswith("text/plain; version=0.0.4")
    r = promtool_check(body)
    assert (r.returncode, r.stdout + r.stderr) == (0, b"")
    feed.write(str(tmp_path / "dg.prom"))
    r = promtool_check((tmp_path / "dg.prom").read_bytes())
    assert (r.returncode, r.stdout + r.stderr) == (0, b"")
    names = {f.name for f in text_string_to_metric_families(body.decode())}
    assert "process_resident_memory_bytes" in names  # the endpoint's: the watcher's own cost
    assert "process_resident_memory_bytes" not in (tmp_path / "dg.prom").read_text()


def test_promtool_does_reject_a_bad_exposition():
    """So that the check above can fail: a counter without `_total` is a lint error."""
    r = promtool_check(b"# HELP x_bytes b\n# TYPE x_bytes counter\nx_bytes 1\n")
    assert r.returncode != 0


def test_openmetrics_when_prometheus_asks_for_it(tmp_path):
    feed, _ = make_feed(tmp_path)
    feed.refresh()
    accept = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
              "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
    body, content_type = feed.render(accept)
    assert content_type.startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")
    assert b'cni_delguard_build_info{arch="' in body


def test_the_one_shot_snapshot_counts_the_whole_log(tmp_path):
    log = tmp_path / "delguard.log"
    log_lines(log, [strict_failure("c1", 900), strict_failure("c1", 800),
                    {"command": "DEL", "decision": "released", "delegateError": ERR7}])
    values = metrics.snapshot(str(log), str(tmp_path / "none"))
    assert values["stuck_strict_dels"] == {(): 1.0}
    assert values["released"] == {(): 1.0}
    assert values["decisions"][("DEL", "forward-strict")] == 2
    assert "node_guarded" not in values  # only the watcher runs the ready check
