"""The operator's tools (list, doctor, stats, release) as processes, the package and the frozen
binary, on a node left in hostile or careless state (issue 20): markers and log lines with numbers
no guard writes, odd dirs among the networks, paths in a conf or a flag that climb out of --root.
Every answer is a summary or one line and an exit code, never a traceback; every `--json` is
strict JSON (NaN and Infinity refused, as jq and Go refuse them)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.process.test_guard_process import bin_dir  # noqa: F401
from tests.support import guard
from tests.support.fakes import install_fake
from tests.support.noderoot import VERSION_ANSWER, shell_plugin, with_shell
from tests.support.nodestate import log_lines, marker

OLD = 3600.0  # seconds: older than doctor's settle time and the ADD timeout
POD = {"namespace": "default", "name": "web"}


def _not_json(name: str) -> Any:
    raise AssertionError(f"{name} printed: not JSON")


def strict(text: str) -> Any:
    return json.loads(text, parse_constant=_not_json)


class Node:
    """A node under `root` (tmp/node/root, so that a path climbing out lands in tmp/node): the
    runtime's conf wrapped by the guard (extra guard keys as given), a fake multus in its bin dir,
    the guard's state and log at their default places. The guard under test runs as the
    operator's tool from outside the root (`tools/`); in the node's bin dir, a plugin that answers
    VERSION with the node's root as / (doctor runs it there, tests/support/noderoot.py)."""

    def __init__(self, tmp: Path, **keys: object) -> None:
        self.beside = tmp / "node"
        self.root = self.beside / "root"
        self.bin = self.root / "opt/cni/bin"
        self.state = self.root / "var/lib/cni/delguard"
        self.results = self.root / "var/lib/cni/results"
        self.log = self.root / "var/log/cni-delguard/delguard.log"
        for d in (self.bin, self.root / "etc/cni/net.d", self.results, self.log.parent):
            d.mkdir(parents=True)
        self.state.mkdir(parents=True, mode=0o700)
        conf = {"cniVersion": "1.0.0", "name": "multus-cni-network", "type": "cni-delguard",
                "delegate": {"type": "multus"}, **keys}
        (self.root / "etc/cni/net.d/00-multus.conf").write_text(json.dumps(conf))
        self.tools = tmp / "tools"
        self.tools.mkdir()
        guard.install_guard(self.tools)
        with_shell(self.root)
        shell_plugin(self.bin / "cni-delguard", VERSION_ANSWER)
        install_fake(self.bin, "multus")

    def tool(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return guard.tool(self.tools, *argv)

    def doctor(self, *extra: str) -> tuple[int, dict[str, Any]]:
        proc = self.tool("doctor", "--root", str(self.root), "--json", *extra)
        assert proc.returncode in (0, 1), proc.stderr
        return proc.returncode, strict(proc.stdout)

    def marker_text(self, network: str, key: str, text: str) -> Path:
        d = self.state / "networks" / network
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = d / f"{key}.json"
        path.write_text(text)
        path.chmod(0o600)
        return path


@pytest.fixture
def node(bin_dir, tmp_path) -> Node:  # noqa: F811 - bin_dir: the package or the frozen guard
    return Node(tmp_path)


# -- numbers no guard writes ------------------------------------------------------------------

TIMES = {
    "400-digits": "1" + "0" * 399,
    "minus-1e999": "-1e999",
    "1e999": "1e999",
    "nan": "NaN",
    "infinity": "Infinity",
    "minus-infinity": "-Infinity",
    "negative": "-5",
    "year-10000": "253402300800",
    "bool": "true",
}


@pytest.mark.parametrize("token", TIMES.values(), ids=TIMES.keys())
def test_a_marker_time_no_guard_writes_is_unknown_to_every_tool(node, token):
    node.marker_text("net1", "c1:eth0",
                     f'{{"state": "attempted", "containerID": "c1", "ifname": "eth0", '
                     f'"time": {token}, "pod": {json.dumps(POD)}}}')
    table = node.tool("list", "--state-dir", str(node.state))
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[1].split() == ["net1", "c1", "eth0", "attempted", "?",
                                                    "default/web"]
    listed = node.tool("list", "--state-dir", str(node.state), "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = strict(listed.stdout)
    assert (row["time"], row["ageSeconds"]) == (None, None)

    code, report = node.doctor()
    assert report["findings"]
    assert node.tool("doctor", "--root", str(node.root)).returncode == code

    prom = node.beside / "m.prom"
    written = node.tool("stats", "--prometheus", str(prom), "--state-dir", str(node.state),
                        "--log-file", str(node.log))
    assert written.returncode == 0, written.stderr
    samples = {s.name: s.value for f in text_string_to_metric_families(prom.read_text())
               for s in f.samples}
    assert "cni_delguard_oldest_attempted_timestamp_seconds" not in samples  # no time: none
    assert samples["cni_delguard_state_readable"] == 1


def test_log_lines_with_numbers_no_guard_writes(node):
    """NaN and Infinity are not JSON: such a line is malformed. A 400-digit error code is JSON,
    but no CNI code: shown as none. Every output stays strict JSON."""
    base = {"ts": "2026-11-25T10:00:00Z", "command": "DEL", "decision": "forward-lenient",
            "network": "net1", "containerID": "c1", "ifname": "eth0",
            "delegateError": {"code": 7, "msg": "gone"}}
    log_lines(node.log, [base])
    with node.log.open("a") as f:
        f.write(json.dumps(base).replace('"code": 7', '"code": NaN') + "\n")
        f.write(json.dumps(base).replace('"2026-11-25T10:00:00Z"', "Infinity") + "\n")
        f.write(json.dumps(base | {"reason": 1}).replace(": 1}", ": -Infinity}") + "\n")
        f.write(json.dumps(base).replace('"code": 7', '"code": ' + "9" * 400) + "\n")
        f.write(json.dumps(base | {"containerID": 10**400}) + "\n")
    summary = node.tool("stats", "--log-file", str(node.log), "--json")
    assert summary.returncode == 0, summary.stderr
    body = strict(summary.stdout)
    assert body["malformedLines"] == 3
    assert body["deadlockBreaks"] == 3
    codes = [b["delegateError"]["code"] for b in body["lastDeadlockBreaks"]]
    assert codes == [7, None, 7]
    assert node.tool("stats", "--log-file", str(node.log)).returncode == 0
    _, report = node.doctor()
    assert any("3 deadlock breaks" in f["message"] for f in report["findings"])


@pytest.mark.parametrize(
    "since",
    [
        pytest.param("99999999999999d", id="gmtime-oserror"),
        pytest.param("9999999999999999999999h", id="gmtime-overflow"),
        pytest.param("1" + "0" * 5000 + "s", id="5001-digits"),
        pytest.param("\u00b2h", id="superscript-digit"),
    ],
)
def test_a_since_that_does_not_fit_is_a_usage_error(node, since):
    log_lines(node.log, [{"ts": "2026-11-25T10:00:00Z", "command": "DEL", "decision": "skip"}])
    proc = node.tool("stats", "--log-file", str(node.log), "--since", since)
    assert proc.returncode == 2
    assert proc.stdout == ""
    errors = [x for x in proc.stderr.splitlines() if "error:" in x]
    assert len(errors) == 1 and errors[0].startswith("cni-delguard: error: argument --since: ")
    assert len(errors[0]) < 200


# -- one rule for which network dirs are read ---------------------------------------------------


def _odd_networks(node: Node) -> dict[str, Path]:
    """net1 healthy (pod default/web's marker); beside it, each holding a marker of the same
    pod: `odd` a symlink to a dir elsewhere, `bad` mis-moded, `x y` a name no guard writes."""
    now = time.time()
    marker(node.state, "net1", "c1", "completed", now - 60, pod=POD)
    elsewhere = node.beside / "elsewhere"
    for name, d in (("odd", elsewhere), ("bad", node.state / "networks/bad"),
                    ("x y", node.state / "networks/x y")):
        d.mkdir(mode=0o700)
        (d / f"c-{name[0]}:eth0.json").write_text(json.dumps(
            {"state": "completed", "containerID": f"c-{name[0]}", "ifname": "eth0",
             "time": now, "pod": POD}))
    (node.state / "networks/odd").symlink_to(elsewhere)
    (node.state / "networks/bad").chmod(0o777)
    nets = node.state / "networks"
    return {"odd": elsewhere, "bad": nets / "bad", "x y": nets / "x y"}


def test_release_list_and_doctor_skip_the_same_odd_network_dirs(node):
    odd = _odd_networks(node)
    done = node.tool("release", "--root", str(node.root), "--pod", "default/web", "--reason", "r")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "released network net1 container c1 ifname eth0 pod default/web (marker completed)"
    ]
    skipped = sorted(x.split(": ", 2)[1].rsplit("/", 1)[1] for x in done.stderr.splitlines())
    assert skipped == ["bad", "odd", "x y"], done.stderr
    assert [p.name for p in node.state.rglob("*.release")] == ["c1:eth0.release"]
    for d in odd.values():
        assert not list(d.glob("*.release"))

    listed = node.tool("list", "--state-dir", str(node.state), "--json")
    assert [(r["network"], r["containerID"]) for r in strict(listed.stdout)] == [("net1", "c1")]

    code, report = node.doctor()
    networks = {Path(f["path"]).name: f for f in report["findings"] if f["check"] == "networks"}
    assert sorted(networks) == ["bad", "odd", "x y"]
    assert networks["odd"]["severity"] == networks["bad"]["severity"] == "problem"
    assert "a symlink or not a directory" in networks["odd"]["message"]
    assert "writable by group or others" in networks["bad"]["message"]
    assert networks["x y"]["severity"] == "info"
    assert code == 1


# -- paths that climb out of --root -------------------------------------------------------------


def test_doctor_repair_never_leaves_the_root(node):
    """A conf's stateDir `/../var/lib/cni/delguard` is what the guard reads as
    /var/lib/cni/delguard: the quarantine goes there under the root, not beside it."""
    escaping = Node(node.beside.parent / "escaping", stateDir="/../var/lib/cni/delguard")
    torn = escaping.results / "net1-c9-eth0"
    torn.write_text("{}")
    os.utime(torn, (time.time() - OLD, time.time() - OLD))
    code, report = escaping.doctor("--repair")
    [fixed] = [f for f in report["findings"] if f["check"] == "libcni"]
    quarantine = escaping.state / "quarantine"
    assert fixed["repaired"].startswith(f"moved to {quarantine}/net1-c9-eth0."), fixed
    [moved] = quarantine.iterdir()
    assert moved.name.startswith("net1-c9-eth0.")
    assert sorted(os.listdir(escaping.beside)) == ["root"]
    assert code == 0


def test_release_state_dir_never_leaves_the_root(node):
    marker(node.state, "net1", "c1", "completed", time.time(), pod=POD)
    decoy = node.beside / "var/lib/cni/delguard"  # where root + "/../var/..." used to land
    marker(decoy, "net1", "c1", "completed", time.time(), pod=POD)
    done = node.tool("release", "--root", str(node.root), "--state-dir",
                     "/../var/lib/cni/delguard", "--container", "c1")
    assert done.returncode == 0, done.stderr
    assert (node.state / "networks/net1/c1:eth0.release").exists()
    assert not list(decoy.rglob("*.release"))
