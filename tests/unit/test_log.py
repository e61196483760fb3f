"""The decision log: JSON lines, never stdout, rotated, never fatal."""

from __future__ import annotations

import json
import os
import stat

import pytest

from cni_delguard.guard import log
from tests.support.paths import widened_dir

WIDE = widened_dir()


def test_lines_are_json_with_the_fields(tmp_path):
    path = tmp_path / "d" / "delguard.log"
    logger = log.Logger(str(path), "info", WIDE)
    logger.event("info", command="DEL", decision="skip")
    logger.event("debug", command="DEL", decision="hidden")
    [line] = path.read_text().splitlines()
    rec = json.loads(line)
    assert rec["command"] == "DEL" and rec["decision"] == "skip" and rec["level"] == "info"
    assert rec["ts"].endswith("Z")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_rotation_keeps_one_previous_generation(tmp_path, monkeypatch):
    monkeypatch.setattr(log, "MAX_BYTES", 200)
    path = tmp_path / "delguard.log"
    logger = log.Logger(str(path), "info", WIDE)
    for i in range(10):
        logger.event("info", n=i, pad="x" * 50)
    logger.event("info", n=10)
    assert (tmp_path / "delguard.log.1").exists()
    assert path.stat().st_size <= 200
    numbers = [
        json.loads(x)["n"]
        for p in (tmp_path / "delguard.log.1", path)
        for x in p.read_text().splitlines()
    ]
    assert numbers == sorted(numbers)
    assert numbers[-1] == 10


def test_an_unwritable_log_goes_to_stderr_not_stdout(tmp_path, capsys):
    target = tmp_path / "target"
    target.write_text("")
    os.symlink(target, tmp_path / "link.log")
    log.Logger(str(tmp_path / "link.log"), "info", WIDE).event("info", x=1)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "cannot write log" in captured.err
    assert target.read_text() == ""


def test_an_empty_path_disables_the_log(tmp_path, capsys):
    log.Logger("", "debug").event("error", x=1)
    assert capsys.readouterr() == ("", "")


def _records(*files):
    return [json.loads(x) for p in files if p.exists() for x in p.read_text().splitlines()]


def test_a_long_text_is_cut_and_its_length_noted(tmp_path):
    """On 58a9769 a delegate's error message went into the log whole (a plugin echoing a long
    config value: megabytes per record)."""
    path = tmp_path / "delguard.log"
    msg = "y" * (1024 * 1024)
    log.Logger(str(path), "info", WIDE).event(
        "error", network="net1", error={"code": 7, "msg": msg}
    )
    [rec] = _records(path)
    cut = rec["error"]["msg"]
    assert cut.startswith("y" * log.MAX_TEXT)
    assert f"[cut: {len(msg)} characters]" in cut
    assert path.stat().st_size < log.MAX_RECORD


def test_a_record_over_the_bound_keeps_who_and_what(tmp_path):
    path = tmp_path / "delguard.log"
    log.Logger(str(path), "info", WIDE).event(
        "error", command="ADD", containerID="c1", network="net1", decision="add-failed",
        many=["z" * 100] * 1000,
    )
    [rec] = _records(path)
    assert {k: rec[k] for k in ("command", "containerID", "network", "decision")} == {
        "command": "ADD", "containerID": "c1", "network": "net1", "decision": "add-failed"}
    assert rec["recordCut"] > log.MAX_RECORD and "many" not in rec


def test_one_network_cannot_rotate_the_others_records_away(tmp_path, monkeypatch):
    """On 58a9769 two failed ADDs of a network whose delegate echoed a long value rotated the
    log twice: every other network's records (doctor's history) were gone. Now each network has
    a budget per window (logbudget.py); the others' records stay in the log or its `.1`."""
    from cni_delguard.guard import logbudget

    monkeypatch.setattr(log, "MAX_BYTES", 64 * 1024)
    monkeypatch.setattr(logbudget, "BUDGET", 16 * 1024)
    path = tmp_path / "delguard.log"
    logger = log.Logger(str(path), "info", WIDE)
    logger.event("error", network="victim", decision="forward-strict", containerID="v1")
    for _ in range(500):
        logger.event("error", network="hostile", decision="add-failed",
                     error={"msg": "h" * 100000})
    logger.event("info", network="victim", decision="skip", containerID="v2")
    records = _records(tmp_path / "delguard.log.1", path)
    assert [r["containerID"] for r in records if r.get("network") == "victim"] == ["v1", "v2"]
    hostile = [r for r in records if r.get("network") == "hostile"]
    # Every hostile decision is still there (none dropped), past the budget in short form: the
    # budget's note, then records with no delegate text, each a few hundred bytes.
    assert len([r for r in hostile if r["decision"] == "add-failed"]) == 500
    assert [r["decision"] for r in hostile].count("log-budget") == 1
    short = [r for r in hostile if r.get("overBudget")]
    assert short and all("msg" not in r.get("error", {}) for r in short)
    assert max(len(json.dumps(r)) for r in short) < 400


def test_a_storm_of_stale_dels_keeps_every_decision_and_its_reason(tmp_path, monkeypatch):
    """Every DEL decision is logged with its reason, budget or not: a retry storm in one network
    goes past the budget and keeps each decision in short form."""
    from cni_delguard.guard import logbudget

    monkeypatch.setattr(logbudget, "BUDGET", 4 * 1024)
    path = tmp_path / "delguard.log"
    logger = log.Logger(str(path), "info", WIDE)
    for n in range(200):
        logger.event("info", network="stormy", command="DEL", decision="skip",
                     containerID=f"c{n}", ifname="eth0", reason="no evidence of an ADD",
                     evidence=[])
    records = _records(path)
    skips = [r for r in records if r.get("decision") == "skip"]
    assert [r["containerID"] for r in skips] == [f"c{n}" for n in range(200)]
    assert all(r["reason"] == "no evidence of an ADD" for r in skips)
    assert any(r.get("overBudget") for r in skips)


def test_the_budget_window_rolls_over_and_reports_what_it_shortened(tmp_path, monkeypatch):
    from cni_delguard.guard import logbudget

    monkeypatch.setattr(logbudget, "BUDGET", 100)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        now = 6000.0
        actions = [logbudget.charge(fd, "x.log", "net1", 60, now).action for _ in range(5)]
        assert actions == ["write", "note", "drop", "drop", "drop"]
        assert logbudget.charge(fd, "x.log", "other", 60, now).action == "write"
        later = logbudget.charge(fd, "x.log", "net1", 60, now + logbudget.WINDOW)
        assert (later.action, later.dropped) == ("write", 3)
        again = logbudget.charge(fd, "x.log", "net1", 10, now + logbudget.WINDOW)
        assert (again.action, again.dropped) == ("write", 0)
    finally:
        os.close(fd)
    tally = tmp_path / ".x.log.budget"
    assert stat.S_IMODE(tally.stat().st_mode) == 0o700
    assert sorted(os.listdir(tally)) == ["net1", "other"]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("a\nforged: line", id="newline"),
        pytest.param("a\x1b[2Jb", id="esc"),
        pytest.param("a\u202eb", id="bidi"),
        pytest.param("a\x9bb", id="c1"),
    ],
)
def test_stderr_is_escaped_as_the_log_is(tmp_path, capsys, name):
    """On 58a9769 a refused `logFile` went raw to stderr, which the runtime puts in its
    journal: newlines and ESC from a NAD reached it."""
    log.Logger(f"/etc/{name}.log", "info", WIDE).event("info", x=1)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("\n")
    assert err.isascii() and "\x1b" not in err
    assert "cannot write log /etc/a" in err


def test_a_missing_log_dir_is_made_only_where_the_guard_may(tmp_path, capsys):
    """A leaf under a place the admin named is made; a missing dir above it never (on
    58a9769 every missing parent was)."""
    log.Logger(str(tmp_path / "leaf" / "x.log"), "info", WIDE).event("info", x=1)
    assert (tmp_path / "leaf" / "x.log").exists()
    log.Logger(str(tmp_path / "a" / "b" / "x.log"), "info", WIDE).event("info", x=1)
    assert not (tmp_path / "a").exists()
    assert "cannot write log" in capsys.readouterr().err
