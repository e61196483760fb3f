"""`cni-delguard stats`: the summary a person reads on the node."""

from __future__ import annotations

import io
import json

from cni_delguard import stats


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "not json\n")


def test_counts_and_last_unblocked_dels(tmp_path):
    log = tmp_path / "delguard.log"
    _write(
        tmp_path / "delguard.log.1", [{"command": "DEL", "decision": "skip", "containerID": "old"}]
    )
    _write(
        log,
        [
            {"command": "ADD", "decision": "add-completed", "containerID": "a"},
            {"command": "DEL", "decision": "forward-strict", "containerID": "a"},
            {"command": "DEL", "decision": "skip", "containerID": "b"},
            {"command": "DEL", "decision": "forward-lenient", "containerID": "c"},
        ],
    )
    summary = stats.summarize(str(log), last=2)
    assert summary["records"] == 5
    assert summary["decisions"] == {
        "ADD add-completed": 1,
        "DEL forward-lenient": 1,
        "DEL forward-strict": 1,
        "DEL skip": 2,
    }
    assert [r["containerID"] for r in summary["lastUnblockedDels"]] == ["b", "c"]


def test_main_prints_text_and_json(tmp_path):
    log = tmp_path / "delguard.log"
    _write(
        log,
        [
            {
                "command": "DEL",
                "decision": "skip",
                "containerID": "b",
                "ts": "t",
                "network": "n",
                "ifname": "eth0",
            }
        ],
    )
    out = io.BytesIO()
    assert stats.main(["--log-file", str(log)], out, io.StringIO()) == 0
    assert "DEL skip" in out.getvalue().decode()
    out = io.BytesIO()
    assert stats.main(["--log-file", str(log), "--json"], out, io.StringIO()) == 0
    assert json.loads(out.getvalue())["decisions"] == {"DEL skip": 1}


def test_a_missing_log_is_an_error(tmp_path):
    err = io.StringIO()
    assert stats.main(["--log-file", str(tmp_path / "none")], io.BytesIO(), err) == 1
    assert "no log" in err.getvalue()
