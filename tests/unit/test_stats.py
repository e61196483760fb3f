"""`cni-delguard stats`: the summary a person reads on the node, from any file and any bytes."""

from __future__ import annotations

import argparse
import io
import json
import os

import pytest

from cni_delguard import cli
from cni_delguard.ops import stats, text


def _write(path, records, tail="not json\n"):
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)


def _del(cid, decision, ts="2026-11-25T10:00:00Z", **extra):
    rec = {"ts": ts, "command": "DEL", "decision": decision, "network": "n",
           "containerID": cid, "ifname": "eth0"}
    return rec | extra


BREAK_ERROR = {"code": 7, "msg": "server_socket is required in cni.conf"}


def test_counts_malformed_lines_and_collapsed_attachments(tmp_path):
    log = tmp_path / "delguard.log"
    _write(tmp_path / "delguard.log.1", [_del("old", "skip", "2026-11-25T09:00:00Z")])
    _write(
        log,
        [
            {"command": "ADD", "decision": "add-completed", "containerID": "a"},
            _del("a", "forward-strict"),
            _del("b", "skip", "2026-11-25T10:00:01Z"),
            _del("b", "skip", "2026-11-25T10:00:02Z"),
            _del("b", "skip", "2026-11-25T10:00:03Z"),
            _del("c", "forward-lenient", "2026-11-25T10:00:04Z", delegateError=BREAK_ERROR),
            _del("d", "released", "2026-11-25T10:00:05Z", delegateError={"code": 3, "msg": "x"}),
        ],
    )
    summary = stats.summarize(str(log), last=3)
    assert summary["records"] == 8
    assert summary["malformedLines"] == 2
    assert summary["decisions"] == {
        "ADD add-completed": 1,
        "DEL forward-lenient": 1,
        "DEL forward-strict": 1,
        "DEL released": 1,
        "DEL skip": 4,
    }
    listed = summary["lastUnblockedDels"]
    assert [(r["containerID"], r["count"]) for r in listed] == [("b", 3), ("c", 1), ("d", 1)]
    assert listed[0]["first"] == "2026-11-25T10:00:01Z"
    assert listed[0]["last"] == "2026-11-25T10:00:03Z"
    assert summary["unblockedAttachments"] == 4
    assert summary["deadlockBreaks"] == 2
    assert [b["delegateError"] for b in summary["lastDeadlockBreaks"]] == [
        BREAK_ERROR, {"code": 3, "msg": "x"}
    ]


def test_observe_counts_what_the_guard_would_have_done(tmp_path):
    log = tmp_path / "delguard.log"
    _write(log, [
        _del("a", "observe", wouldDecide="skip"),
        _del("b", "observe", wouldDecide="skip", wouldFree=True, error=BREAK_ERROR),
        _del("c", "observe", wouldDecide="forward-lenient", wouldFree=True, error=BREAK_ERROR),
        _del("d", "observe", wouldDecide="forward-strict", wouldFree=False, error=BREAK_ERROR),
    ])
    summary = stats.summarize(str(log), last=10)
    assert summary["observe"] == {"wouldHaveSkipped": 2, "wouldHaveFreed": 2}
    code, out, _ = _stats("--log-file", str(log))
    assert code == 0 and "would have skipped 2 DELs, would have freed 2" in out


def test_since_and_network_filter(tmp_path):
    log = tmp_path / "delguard.log"
    _write(log, [
        _del("a", "skip", "2026-11-25T09:59:59Z"),
        _del("b", "skip", "2026-11-25T10:00:00Z"),
        _del("c", "skip", "2026-11-25T11:00:00Z") | {"network": "other"},
        _del("d", "skip") | {"ts": 12},
    ])
    code, out, _ = _stats("--log-file", str(log), "--json", "--since", "2026-11-25T10:00:00Z")
    assert [r["containerID"] for r in json.loads(out)["lastUnblockedDels"]] == ["b", "c"]
    code, out, _ = _stats("--log-file", str(log), "--json", "--network", "other")
    assert code == 0
    assert [r["containerID"] for r in json.loads(out)["lastUnblockedDels"]] == ["c"]
    assert stats.parse_since("2h", now=7200.0) == "1970-01-01T00:00:00Z"
    assert stats.parse_since("2026-11-25") == "2026-11-25T00:00:00Z"


def test_a_bad_since_is_a_usage_error(tmp_path):
    code, _, err = _stats("--log-file", str(tmp_path), "--since", "yesterday")
    assert code == 2 and "--since" in err


@pytest.mark.parametrize("since", ["3h", "99999999999999d", "9999999999999999999999h",
                                   "1" + "0" * 5000 + "s"])
def test_a_duration_that_reaches_before_1970_is_refused(since):
    with pytest.raises(argparse.ArgumentTypeError, match="reaches before 1970"):
        stats.parse_since(since, now=7200.0)


def test_numbers_no_guard_writes_never_reach_the_json(tmp_path):
    """NaN and Infinity are no JSON: their lines are malformed. A code out of a CNI code's
    range is no code. The output is strict JSON."""
    log = tmp_path / "delguard.log"
    huge = {"code": 10**400, "msg": "x"}
    _write(log, [_del("a", "forward-lenient", delegateError=huge),
                 _del("b", "forward-lenient", delegateError={"code": -1, "msg": 5})], tail="")
    with log.open("a") as f:
        f.write('{"ts": NaN, "command": "DEL", "decision": "skip"}\n')
        f.write('{"ts": "t", "command": "DEL", "decision": "skip", "x": -Infinity}\n')
    code, out, _ = _stats("--log-file", str(log), "--json")
    assert code == 0
    body = json.loads(out, parse_constant=_refuse)
    assert body["malformedLines"] == 2
    assert [b["delegateError"] for b in body["lastDeadlockBreaks"]] == [
        {"code": None, "msg": "x"}, {"code": None, "msg": ""}
    ]


def _refuse(name):
    raise AssertionError(f"{name} is not JSON")


def test_json_output_is_strict():
    assert json.loads(text.as_json({"a": [1, 0.5, None]})) == {"a": [1, 0.5, None]}
    with pytest.raises(ValueError, match="not JSON compliant"):
        text.as_json({"a": float("nan")})


def test_text_shows_each_break_with_the_delegate_error_and_the_pod(tmp_path):
    log = tmp_path / "delguard.log"
    _write(log, [_del("c", "forward-lenient", delegateError=BREAK_ERROR, pod="ns1/web-0",
                      podUID="u1")])
    code, out, _ = _stats("--log-file", str(log))
    assert code == 0
    assert "deadlock breaks (delegate failed, DEL answered success): 1" in out
    assert "n c eth0 pod ns1/web-0  delegate error 7: server_socket is required" in out
    assert "1 decisions" in out and "(1 malformed lines skipped)" in out


def test_control_characters_never_reach_the_terminal(tmp_path):
    log = tmp_path / "delguard.log"
    evil = "\x1b]0;owned\x07\x1b[2J\u202e"
    _write(log, [
        _del(evil, "skip") | {"decision": "skip\x1b[31m", "network": evil, "pod": evil},
        _del(evil, "forward-lenient", delegateError={"code": evil, "msg": evil}),
    ])
    code, out, err = _stats("--log-file", str(log))
    assert code == 0
    assert not any((ord(c) < 32 and c != "\n") or 0x7F <= ord(c) <= 0x9F or c == "\u202e"
                   for c in out + err)
    assert "\\x1b]0;owned\\x07" in out and "\\u202e" in out


@pytest.mark.parametrize(
    "content",
    [b"", b"\xff\xfe\x00garbage\n", b"[1, 2]\n\"text\"\nnull\n", b"[" * 100000 + b"\n",
     b'{"command": "DEL"' * 70000, b"\n\n\n", b'{"command": 5, "decision": {"a": 1}}\n'],
    ids=["empty", "binary", "not-objects", "deep", "one-long-line", "blank", "odd-types"],
)
def test_any_bytes_give_a_summary(tmp_path, content):
    log = tmp_path / "delguard.log"
    log.write_bytes(content)
    code, out, err = _stats("--log-file", str(log))
    assert (code, err) == (0, "")
    assert "decisions in" in out
    code, out, _ = _stats("--log-file", str(log), "--json")
    assert code == 0 and json.loads(out)["log"] == str(log)


@pytest.mark.parametrize("kind", ["missing", "directory", "fifo"])
def test_what_is_not_a_log_is_one_line_and_exit_2(tmp_path, kind):
    path = tmp_path / "delguard.log"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)  # reading it would block for ever
    code, out, err = _stats("--log-file", str(path))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("cni-delguard stats: ")
    assert "Traceback" not in err


def test_main_prints_text_and_json(tmp_path):
    log = tmp_path / "delguard.log"
    _write(log, [_del("b", "skip")])
    code, out, _ = _stats("--log-file", str(log))
    assert code == 0 and "DEL skip" in out
    code, out, _ = _stats("--log-file", str(log), "--json")
    assert code == 0 and json.loads(out)["decisions"] == {"DEL skip": 1}


def _stats(*argv: str) -> tuple[int, str, str]:
    out, err = io.BytesIO(), io.StringIO()
    code = cli.main(["stats", *argv], {}, io.BytesIO(), out, err)
    return code, out.getvalue().decode(), err.getvalue()
