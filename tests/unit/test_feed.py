"""monitoring/feed.py, the watcher's metrics: counters from what is logged while it runs, the stuck
strict DELs remembered across a restart, the log read incrementally (never again whole), and an
exposition that promtool accepts."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cni_delguard.monitoring import metrics, series
from cni_delguard.monitoring.feed import Plan, WatcherFeed
from cni_delguard.node import actions, watch
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
    # Every pair a command can log is there from the start, at 0 (the history is not counted).
    assert feed.values["decisions"] == dict.fromkeys(series.DECISION_PAIRS, 0.0)
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
    assert value(feed, "node_guarded") == 0
    assert feed.values["ready"] == {(r,): float(r == "conf-not-wrapped")
                                    for r in series.READY_REASONS.values()}
    assert feed.values["mode"] == {("enforce",): 0.0, ("observe",): 0.0}  # no guard named


def test_every_label_set_is_there_before_anything_happened(tmp_path):
    """The first error of a watcher's life must be an increase from 0: every series with every
    label set it can have is in the first snapshot (only `other` comes lazily)."""
    feed, _ = make_feed(tmp_path)
    feed.refresh()
    for s in series.SERIES:
        assert s.name in feed.values, s.name
        assert set(s.initial()) <= set(feed.values[s.name]), s.name
    for (command, decision) in series.DECISION_PAIRS:
        assert value(feed, "decisions", command, decision) == 0
    for command in series.TIMED:
        h = feed.values["delegate_seconds"][(command,)]
        assert (h.cumulative()[-1], h.total) == (("+Inf", 0.0), 0.0)
        assert value(feed, "delegate_errors", command) == 0
    assert feed.values["oldest_attempted_timestamp_seconds"] == {}  # none: no sample, not 0
    assert value(feed, "refresh_errors") == 0
    assert value(feed, "refresh_interval_seconds") == 15.0


def test_the_delegates_time_and_failures_are_folded_from_the_log(tmp_path):
    log = tmp_path / "delguard.log"
    feed, _ = make_feed(tmp_path)
    feed.refresh()
    log_lines(log, [
        {"command": "ADD", "decision": "add-completed", "delegateMs": 20.0},
        {"command": "ADD", "decision": "add-failed", "delegateMs": 180000.0, "error": ERR7},
        {"command": "DEL", "decision": "forward-strict", "delegateMs": 8.5},
        {"command": "DEL", "decision": "forward-strict", "delegateMs": 12000, "error": ERR7},
        {"command": "DEL", "decision": "forward-lenient", "delegateMs": 30.0,
         "delegateError": ERR7},
        # No delegate call: a skip, and a DEL whose delegate could not even be found.
        {"command": "DEL", "decision": "skip"},
        {"command": "DEL", "decision": "forward-strict", "error": ERR7},
        # Not the guard's numbers: left out of the histogram.
        {"command": "DEL", "decision": "forward-strict", "delegateMs": "12"},
        {"command": "DEL", "decision": "forward-strict", "delegateMs": True},
        {"command": "DEL", "decision": "forward-strict", "delegateMs": -1},
        {"command": "DEL", "decision": "forward-strict", "delegateMs": 1e30},
        {"command": "CHECK", "decision": "forward", "delegateMs": 3.0},  # not timed
    ])
    feed.refresh()
    add, dele = (feed.values["delegate_seconds"][(c,)] for c in ("ADD", "DEL"))
    assert dict(add.cumulative())["0.025"] == 1
    assert dict(add.cumulative())["120.0"] == 1 and dict(add.cumulative())["180.0"] == 2
    assert add.total == pytest.approx(180.02)
    assert dict(dele.cumulative())["0.01"] == 1
    assert dict(dele.cumulative())["0.05"] == 2
    assert dict(dele.cumulative())["10.0"] == 2 and dict(dele.cumulative())["15.0"] == 3
    assert dict(dele.cumulative())["+Inf"] == 3
    assert (value(feed, "delegate_errors", "ADD"), value(feed, "delegate_errors", "DEL")) == (1, 2)


GUARDED_CONF = {"cniVersion": "1.0.0", "name": "multus-cni-network", "type": "cni-delguard",
                "delegate": {"type": "multus"}}


@pytest.mark.parametrize(
    ("conf", "reason", "mode"),
    [
        pytest.param(GUARDED_CONF, "plugin-missing", "enforce", id="enforce-by-default"),
        pytest.param({**GUARDED_CONF, "mode": "observe"}, "plugin-missing", "observe",
                     id="observe"),
        pytest.param({**GUARDED_CONF, "mode": "later"}, "plugin-missing", "other",
                     id="a-mode-the-guard-refuses"),
        pytest.param({"cniVersion": "1.0.0", "name": "n", "type": "multus"}, "conf-not-wrapped",
                     None, id="not-wrapped"),
    ],
)
def test_the_ready_state_set_and_the_mode(tmp_path, conf, reason, mode):
    feed, _ = make_feed(tmp_path)
    (tmp_path / "etc/cni/net.d/00-multus.conf").write_text(json.dumps(conf))
    feed.refresh()
    assert feed.values["ready"] == {(r,): float(r == reason)
                                    for r in series.READY_REASONS.values()}
    expected = {m: float(m == mode) for m in series.MODES}
    if mode == "other":
        expected["other"] = 1.0
    assert {k[0]: v for k, v in feed.values["mode"].items()} == expected


def test_since_when_the_ready_answer_holds(tmp_path):
    """cni_delguard_ready_since_timestamp_seconds: the refresh that first found the current
    answer (the watcher's first, for the answer it starts with), kept while it holds."""
    times = iter([1000.0, 1015.0, 1030.0, 1045.0])
    feed, _ = make_feed(tmp_path)
    feed.clock = lambda: next(times)
    conf = tmp_path / "etc/cni/net.d/00-multus.conf"
    feed.refresh()  # no conf: not wrapped, since the first refresh
    feed.refresh()
    assert (feed.reason, value(feed, "ready_since_timestamp_seconds")) == ("conf-not-wrapped",
                                                                          1000.0)
    conf.write_text(json.dumps(GUARDED_CONF))
    feed.refresh()  # named, and no plugin: another answer, since this refresh
    feed.refresh()
    assert (feed.reason, value(feed, "ready_since_timestamp_seconds")) == ("plugin-missing",
                                                                          1030.0)


def test_a_failed_refresh_leaves_the_last_values_with_their_time_and_counts(tmp_path):
    """A refresh that fails is never served as current: the values stay those of the last
    good one, with its time, and refresh_errors_total says it failed."""
    times = iter([1000.0, None, 1030.0])

    def clock() -> float:
        now = next(times)
        if now is None:
            raise OSError("the node's state could not be read")
        return now

    feed, counts = make_feed(tmp_path)
    feed.clock = clock
    feed.refresh()
    assert value(feed, "last_refresh_timestamp_seconds") == 1000.0
    counts.rewraps = 5
    with pytest.raises(OSError, match="could not be read"):
        feed.refresh()
    assert value(feed, "last_refresh_timestamp_seconds") == 1000.0
    assert value(feed, "rewraps") == 0  # the old snapshot, not half of a new one
    assert value(feed, "refresh_errors") == 1
    feed.refresh()
    assert (value(feed, "last_refresh_timestamp_seconds"), value(feed, "rewraps")) == (1030, 5)
    assert value(feed, "refresh_errors") == 1


def test_the_oldest_attempted_marker_is_a_time_not_an_age(tmp_path):
    state = tmp_path / "state"
    feed, _ = make_feed(tmp_path)
    marker(state, "net1", "c0", "completed", 1_700_000_000.0)
    feed.refresh()
    assert feed.values["oldest_attempted_timestamp_seconds"] == {}  # none: no sample, not 1970
    marker(state, "net1", "c1", "attempted", 1_700_000_100.0)
    marker(state, "net2", "c2", "attempted", 1_700_000_050.0)
    feed.refresh()
    assert value(feed, "oldest_attempted_timestamp_seconds") == 1_700_000_050.0


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
            pytest.fail("promtool missing: tools/install-deps.sh test installs Debian's prometheus")
        pytest.skip("no promtool (Debian's prometheus: tools/install-deps.sh test)")
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


def test_the_ready_check_follows_the_dirs_the_watcher_moved_to(tmp_path):
    """A distribution's upgrade moved the conf dir: the watcher sets counts.where, and the
    metrics' ready check reads the new dirs, not the ones the watcher started on."""
    feed, counts = make_feed(tmp_path)
    moved = tmp_path / "moved/net.d"
    moved.mkdir(parents=True)
    (moved / "00-multus.conf").write_text(json.dumps(GUARDED_CONF))
    feed.refresh()
    assert value(feed, "ready", "conf-not-wrapped") == 1.0  # the old conf dir holds nothing
    counts.where = dataclasses.replace(feed.plan.opts, conf_dir=str(moved))
    feed.refresh()
    assert value(feed, "ready", "plugin-missing") == 1.0  # the new conf names the guard


# Run as root without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: a dir or file of mode 000 then
# answers EACCES, as an SELinux or AppArmor denial does on a node.
CHILD = """
import json, sys
sys.path.insert(0, {repo!r})
from pathlib import Path
from tests.unit.test_feed import make_feed
feed, _ = make_feed(Path({root!r}))
feed.refresh()
print(json.dumps({{"ready": [k[0] for k, v in feed.values["ready"].items() if v == 1],
                  "errors": feed.values["refresh_errors"][()]}}))
"""


@pytest.mark.parametrize("unreadable", ["etc/cni/net.d", "etc/cni/net.d/00-multus.conf"])
def test_a_conf_that_cannot_be_read_is_a_ready_state_not_a_failed_refresh(tmp_path, unreadable):
    """EACCES from listing the conf dir or reading the conf: the node is not shown guarded
    (conf-not-wrapped, which pages), and every refresh still succeeds; it used to escape
    ready.status() and fail each one, leaving the node with no per-node value at all."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and util-linux's setpriv to drop CAP_DAC_OVERRIDE")
    make_feed(tmp_path)
    (tmp_path / "etc/cni/net.d/00-multus.conf").write_text('{"type": "multus"}')
    (tmp_path / unreadable).chmod(0)
    caps = "-dac_override,-dac_read_search"
    repo = Path(__file__).resolve().parents[2]
    r = subprocess.run(["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}", "--",
                        sys.executable, "-c", CHILD.format(repo=str(repo), root=str(tmp_path))],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"ready": ["conf-not-wrapped"], "errors": 0}
