"""ops/stuck.find_stuck: which attachments' strict DEL has kept failing, from the decision log."""

from __future__ import annotations

import calendar
import shlex
import time

import pytest

from cni_delguard.ops import stuck, text

T0 = calendar.timegm(time.strptime("2026-11-26T01:00:00Z", "%Y-%m-%dT%H:%M:%SZ"))
UID = "6f1c0a52-3b9e-4d1f-9a57-0c2b8e4d7a10"
ERR = {"code": 7, "msg": "server_socket is required in cni.conf"}


def ts(minutes: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 + minutes * 60))


def dele(minutes, decision="forward-strict", error=ERR, cid="c1", **extra):
    """A DEL line as the guard writes it (commands/delete.py, context.Context.record)."""
    rec = {"ts": ts(minutes), "level": "error" if error else "info", "command": "DEL",
           "containerID": cid, "ifname": "eth0", "network": "net1", "pod": "default/web",
           "podUID": UID, "decision": decision, "reason": "ADD completed: ..."}
    if error is not None:
        rec["error"] = error
    rec.update(extra)
    return rec


def found(records, minutes=60, **kw):
    return [s.as_dict() for s in stuck.find_stuck(records, T0 + minutes * 60, **kw)]


def test_repeated_failures_past_the_threshold_are_stuck():
    last = {"code": 11, "msg": "delegate multus timed out on DEL"}
    [s] = found([dele(0), dele(5), dele(20, error=last)], minutes=30)
    assert s == {
        "network": "net1", "containerID": "c1", "ifname": "eth0", "pod": "default/web",
        "podUID": UID, "failures": 3, "since": ts(0), "last": ts(20), "lastError": last,
        "command": "cni-delguard release --container c1 --ifname eth0 --network net1 "
        f"--reason 'strict DEL failing since {ts(0)}; leak accepted'",
    }


@pytest.mark.parametrize(
    ("records", "minutes"),
    [
        pytest.param([dele(0)], 60, id="one-failure"),
        pytest.param([dele(0), dele(5)], 9, id="within-threshold"),
        pytest.param([dele(0), dele(5), dele(6, error=None)], 60, id="then-succeeded"),
        pytest.param([dele(0), dele(5), dele(6, "released", None)], 60, id="then-released"),
        pytest.param([dele(0), dele(5), dele(6, "skip", None)], 60, id="then-skipped"),
        pytest.param([dele(0), dele(5, "forward-lenient", None)], 60, id="lenient-is-not-stuck"),
        pytest.param([dele(0, cid="../etc"), dele(5, cid="../etc")], 60, id="hostile-id"),
        pytest.param([dele(0, error="boom"), dele(5, error="boom")], 60, id="error-not-object"),
        pytest.param([dele(0, ts="yesterday"), dele(5, ts=None)], 60, id="bad-timestamps"),
        pytest.param([dele(0, command="ADD"), dele(5, command="ADD")], 60, id="add-lines"),
    ],
)
def test_not_stuck(records, minutes):
    assert found(records, minutes) == []


def test_a_success_restarts_the_streak():
    [s] = found([dele(0), dele(1), dele(2, error=None), dele(3), dele(20)], minutes=30)
    assert (s["since"], s["failures"]) == (ts(3), 2)


def test_a_del_that_was_not_carried_out_neither_counts_nor_resets():
    busy = {"code": 11, "msg": "another operation holds the lock"}
    [s] = found([dele(0), dele(1, "error", busy), dele(20)], minutes=30)
    assert (s["failures"], s["lastError"]) == (2, ERR)


def test_attachments_are_kept_apart_and_oldest_comes_first():
    records = [dele(5, cid="c2"), dele(0), dele(10, cid="c2"), dele(12), dele(13, cid="c3")]
    assert [s["containerID"] for s in found(records, minutes=30)] == ["c1", "c2"]


def test_threshold_and_min_failures_are_the_callers():
    records = [dele(0), dele(1)]
    assert found(records, minutes=2, threshold=60) == [found(records, minutes=60)[0]]
    assert found(records, minutes=60, min_failures=3) == []


def test_hostile_log_values_are_not_passed_on():
    evil = {"code": True, "msg": "fail\x1b[2J\nnext" + "x" * 1000}
    records = [dele(0, pod="default/../x", podUID="not-a-uid"),
               dele(20, error=evil, pod="ns/web\x1b", podUID=UID + "\n")]
    [s] = found(records, minutes=30)
    assert (s["pod"], s["podUID"]) == (None, None)
    assert s["lastError"]["code"] is None
    assert s["lastError"]["msg"].startswith("fail\\x1b[2J\\nnext")
    assert len(s["lastError"]["msg"]) == stuck.MAX_ERROR
    assert all(c.isprintable() for c in s["lastError"]["msg"])


def test_junk_records_are_skipped():
    records = [{}, {"command": "DEL"}, {"ts": ts(0), "command": "DEL", "network": 5},
               dele(0), dele(20)]
    assert len(found(records, minutes=30)) == 1


def test_command_names_the_root_and_state_dir_and_survives_the_shell():
    [s] = stuck.find_stuck([dele(0), dele(20)], T0 + 3600, root="/host dir",
                           state_dir="/var/lib/cni/guard's")
    assert shlex.split(s.command) == [
        "cni-delguard", "release", "--root", "/host dir", "--state-dir", "/var/lib/cni/guard's",
        "--container", "c1", "--ifname", "eth0", "--network", "net1",
        "--reason", f"strict DEL failing since {ts(0)}; leak accepted",
    ]


@pytest.mark.parametrize(
    ("root", "argv", "expected"),
    [
        pytest.param("/", ("--container", "c1"), "cni-delguard release --container c1",
                     id="on-the-node"),
        pytest.param("/host", ("--container", "c1"),
                     "cni-delguard release --root /host --container c1", id="in-the-pod"),
        pytest.param("/host", ("--reason", "a b; rm -rf /"),
                     "cni-delguard release --root /host --reason 'a b; rm -rf /'",
                     id="quoted-for-a-shell"),
    ],
)
def test_a_printed_command_works_where_the_tool_was_run(root, argv, expected):
    """What doctor prints is run as written where doctor ran: in the watcher's pod, with the
    same --root (tests/installer/test_runbooks.py runs it in the image)."""
    assert text.command("release", root, *argv) == expected
