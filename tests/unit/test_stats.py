"""`cni-delguard stats`: the summary a person reads on the node."""

from __future__ import annotations

import io
import json

from cni_delguard import cli
from cni_delguard.ops import stats


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
    code, out, _ = _stats("--log-file", str(log))
    assert code == 0 and "DEL skip" in out
    code, out, _ = _stats("--log-file", str(log), "--json")
    assert code == 0 and json.loads(out)["decisions"] == {"DEL skip": 1}


def test_a_missing_log_is_an_error(tmp_path):
    code, _, err = _stats("--log-file", str(tmp_path / "none"))
    assert code == 1 and "no log" in err


def _stats(*argv: str) -> tuple[int, str, str]:
    out, err = io.BytesIO(), io.StringIO()
    code = cli.main(["stats", *argv], {}, io.BytesIO(), out, err)
    return code, out.getvalue().decode(), err.getvalue()
