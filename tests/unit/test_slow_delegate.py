"""tests/fakes/slow_delegate.py, run as a plugin: the pod's wait, recorded, then stale_delegate's
answer (its state written, so a later DEL succeeds)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.fakes import install_slow
from tests.support.records import read_jsonl


def run(plugin: Path, command: str, conf: dict[str, Any], pod: str) -> tuple[int, Any]:
    env = {"PATH": "/usr/bin:/bin", "CNI_COMMAND": command, "CNI_CONTAINERID": "c1",
           "CNI_IFNAME": "eth0", "CNI_NETNS": "/proc/self/ns/net",
           "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME={pod}"}
    res = subprocess.run([str(plugin)], input=json.dumps(conf), env=env, capture_output=True,
                         text=True, timeout=60, check=False)
    return res.returncode, json.loads(res.stdout) if res.stdout else None


@pytest.mark.parametrize(
    ("pod", "waits"),
    [
        pytest.param("sa1-node", True, id="its-prefix-waits"),
        pytest.param("sa10-node", False, id="another-prefix-does-not"),
        pytest.param("other", False, id="no-prefix"),
    ],
)
def test_add_waits_by_pod_then_answers_as_stale_delegate(tmp_path, pod, waits):
    (tmp_path / "bin").mkdir()
    plugin = install_slow(tmp_path / "bin")
    record = tmp_path / "slow.jsonl"
    conf = {"cniVersion": "1.0.0", "name": "n", "type": "slow-delegate",
            "stateDir": str(tmp_path / "state"), "recordFile": str(tmp_path / "fake.jsonl"),
            "slowRecordFile": str(record), "addSeconds": {"sa1": 0.2}}
    code, out = run(plugin, "ADD", conf, pod)
    assert (code, out["interfaces"]) == (0, [])
    start, end = read_jsonl(record)
    assert (start["phase"], end["phase"], start["pod"]) == ("start", "end", pod)
    if waits:  # a lower bound only: a sleep never ends early, a loaded machine may be late
        assert end["time"] - start["time"] >= 0.2
    assert run(plugin, "DEL", conf, pod)[0] == 0  # the state the ADD left
    assert run(plugin, "DEL", conf, pod)[0] == 1  # stale_delegate's DEL without state
