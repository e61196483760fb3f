"""live.py: the watcher's heartbeat and the liveness probe's verdict on it."""

from __future__ import annotations

import json

from cni_delguard.node import live


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_fresh_heartbeat_is_live_and_a_stale_one_is_not(tmp_path):
    path, clock = tmp_path / "live", Clock()
    heart = live.Heartbeat(str(path), clock)
    heart.beat("")
    assert live.check(str(path), clock.now + 5) == (0, "live")
    code, line = live.check(str(path), clock.now + live.STALE + 1)
    assert code == 14 and "61 s ago" in line


def test_no_heartbeat_file_or_a_torn_one_is_not_live(tmp_path):
    assert live.check(str(tmp_path / "none"), 0.0)[0] == 14
    (tmp_path / "torn").write_text('{"time": ')
    assert live.check(str(tmp_path / "torn"), 0.0)[0] == 14
    (tmp_path / "nan").write_text('{"time": NaN}')
    assert live.check(str(tmp_path / "nan"), 0.0)[0] == 14


def test_a_failure_to_install_is_live_until_it_outlasts_the_grace(tmp_path):
    path, clock = tmp_path / "live", Clock()
    heart = live.Heartbeat(str(path), clock)
    heart.beat("the plugin cannot be installed into /x")
    since = clock.now
    clock.now += 30
    heart.beat("the plugin cannot be installed into /x")  # the same failure: since is kept
    assert json.loads(path.read_text())["unfixedSince"] == since
    code, line = live.check(str(path), clock.now)
    assert code == 0 and "failing for 30 s" in line
    clock.now += live.GRACE
    heart.beat("the plugin cannot be installed into /x")
    code, line = live.check(str(path), clock.now)
    assert code == 15 and "cannot be installed into /x" in line
    heart.beat("")  # fixed
    assert live.check(str(path), clock.now) == (0, "live")


def test_the_heartbeat_is_written_at_most_once_a_second_while_nothing_changes(tmp_path):
    path, clock = tmp_path / "live", Clock()
    heart = live.Heartbeat(str(path), clock)
    heart.beat("")
    clock.now += 0.5
    heart.beat("")
    assert json.loads(path.read_text())["time"] == 1000.0
    clock.now += 0.6
    heart.beat("")
    assert json.loads(path.read_text())["time"] == 1001.1


def test_the_heartbeat_carries_what_keeps_the_metrics_from_being_served(tmp_path):
    """`ready --live-file` fails while the watcher's metrics port is held by another process
    (code 16, saying so), and not when the heartbeat is stale: that is the liveness probe's."""
    path = str(tmp_path / "live")
    held = "metrics: 127.0.0.1:10647 is held by another process"
    live.Heartbeat(path, clock=lambda: 1000.0).beat("", held)
    assert live.metrics_problem(path, 1001.0) == held
    assert live.check(path, 1001.0)[0] == 0  # live all the same: a restart would not help
    assert live.metrics_problem(path, 1000.0 + live.STALE + 1) == ""
    live.Heartbeat(path, clock=lambda: 1002.0).beat("", "")
    assert live.metrics_problem(path, 1003.0) == ""
