"""The series registry (monitoring/series.py) stays the one truth: every decision the guard logs has
its label value, README lists every series and every alert, the metrics' idea of a deadlock break is
`stats`' idea, and prometheus-client stays off the plugin's exec path and the `ready` probe."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cni_delguard.guard import decide
from cni_delguard.monitoring import series
from cni_delguard.monitoring.counts import DecisionCounts
from cni_delguard.ops import stats

REPO = Path(__file__).resolve().parents[2]
COMMANDS_DIR = REPO / "cni_delguard" / "commands"
RULES = REPO / "installer/kustomize/overlays/monitoring/prometheusrule.yaml"  # the rendered ones


def logged_decisions(paths: list[Path] | None = None) -> set[str]:
    """Every decision literal in the commands: `decision="..."` and decision_fields(ev, "...")."""
    found = set()
    for path in COMMANDS_DIR.glob("*.py") if paths is None else paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            for kw in node.keywords:
                if kw.arg == "decision" and isinstance(kw.value, ast.Constant):
                    found.add(kw.value.value)
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name == "decision_fields" and isinstance(node.args[1], ast.Constant):
                found.add(node.args[1].value)
    return found


def test_every_logged_decision_has_its_label_value():
    literal = logged_decisions()
    assert {"error", "observe", "add-completed", "forward"} <= literal  # the scan does find them
    assert literal <= set(series.DECISIONS)


# Which commands each module's decisions are logged for (commands/__init__.py's table).
LOGGED_FOR = {"add.py": ("ADD",), "delete.py": ("DEL",), "status.py": ("STATUS",),
              "passthrough.py": ("CHECK", "GC", "STATUS")}


@pytest.mark.parametrize(("module", "commands"), list(LOGGED_FOR.items()))
def test_each_command_has_the_decisions_its_module_logs(module, commands):
    """The pairs exported at 0 from the start include every pair the guard can log."""
    literal = logged_decisions([COMMANDS_DIR / module])
    assert literal
    for command in commands:
        assert literal <= set(series.DECISIONS_OF[command]), command


def test_a_deadlock_break_means_the_same_to_stats_and_to_the_metrics():
    error = {"code": 7, "msg": "no state"}
    records = [
        {"command": "DEL", "decision": decision, **extra}
        for decision in (*series.DECISIONS, "not-a-decision")
        for extra in ({}, {"delegateError": error}, {"delegateError": "not an object"})
    ]
    tally, folded = stats.Tally(), DecisionCounts()
    for rec in records:
        tally.add(rec)
        folded.add(rec)
    assert folded.breaks == len(tally.breaks) == len(decide.BREAKS)


def test_names_are_unique_and_prefixed_and_counters_end_in_total():
    exposed = [s.exposed for s in series.SERIES]
    assert len(set(exposed)) == len(exposed)
    for s in series.SERIES:
        assert re.fullmatch(r"cni_delguard_[a-z_]+", s.exposed)
        assert s.exposed.endswith("_total") == (s.kind == series.COUNTER)
        assert s.help and s.source in (series.LOG, series.STATE, series.WATCH, series.BUILD)



def test_the_ready_reasons_are_the_ready_checks_codes():
    """node/ready.py's table of exit codes, as its docstring gives it, has one reason each; but
    16, which only the probe's `--live-file` gives (the watcher's own port), never the check the
    watcher runs for its metrics."""
    from cni_delguard.node import ready

    codes = {int(m) for m in re.findall(r"^\| (\d+) \|", ready.__doc__ or "", re.M)}
    assert ready.METRICS_NOT_SERVED in codes
    assert codes - {ready.METRICS_NOT_SERVED} == set(series.READY_REASONS)


def test_the_names_the_issue_asks_for():
    exposed = {s.exposed for s in series.SERIES}
    assert {
        "cni_delguard_node_guarded",
        "cni_delguard_build_info",
        "cni_delguard_stuck_strict_dels",
        "cni_delguard_released_total",
        "cni_delguard_ready",
        "cni_delguard_mode",
        "cni_delguard_last_refresh_timestamp_seconds",
        "cni_delguard_refresh_errors_total",
        "cni_delguard_delegate_seconds",
        "cni_delguard_oldest_attempted_timestamp_seconds",
    } <= exposed


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        pytest.param("decision", "skip", "skip", id="known"),
        pytest.param("decision", "skip\n", "other", id="almost"),
        pytest.param("decision", 'x"} 1\nevil 2', "other", id="injection"),
        pytest.param("decision", None, "other", id="missing"),
        pytest.param("command", ["DEL"], "other", id="not-a-string"),
        pytest.param("state", "deleting", "deleting", id="state"),
    ],
)
def test_label_values_come_from_the_vocabulary(name, value, expected):
    assert series.label(name, value) == expected


def test_a_log_of_a_million_distinct_decisions_keeps_the_label_set_small():
    c = DecisionCounts()
    for i in range(20_000):
        c.add({"command": f"CMD{i}", "decision": f"d{i}"})
    c.add({"command": "DEL", "decision": "skip"})
    assert set(c.decisions) == {("other", "other"), ("DEL", "skip")}
    assert c.decisions[("other", "other")] == 20_000


def readme() -> str:
    """The monitoring page and the runbooks (docs/), where README sends an operator."""
    pages = ("monitoring.md", "runbooks.md")
    return "\n".join((REPO / "docs" / page).read_text() for page in pages)


def test_readme_lists_every_series():
    text = readme()
    missing = [s.exposed for s in series.SERIES if f"`{s.exposed}" not in text]
    assert missing == []


def alerts() -> list[dict]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["spec"]["groups"] for r in g["rules"] if "alert" in r]


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_alert_has_a_severity_and_a_readme_runbook_that_exists():
    runbooks = (REPO / "docs" / "runbooks.md").read_text()
    anchors = {anchor(line.lstrip("#")) for line in runbooks.splitlines() if line.startswith("#")}
    assert alerts()
    for rule in alerts():
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
        target = rule["annotations"]["runbook_url"]
        # The template's link is relative to the repository: it names no host the project does
        # not control. What an on-call clicks is absolute (a relative link is dead in
        # Alertmanager, Slack or PagerDuty): the chart puts the project's home
        # (packaging/project.env) or prometheusRule.runbookUrl before the `#`, kustomize its
        # settings.yaml's runbookBaseURL (tests/installer/test_chart.py, test_monitoring.py).
        assert re.fullmatch(r"docs/runbooks\.md#[a-z]+", target), rule["alert"]
        assert target.split("#", 1)[1] in anchors, rule["alert"]
        assert f"`{rule['alert']}`" in readme(), rule["alert"]


# Run in a child interpreter: which modules a path loads, reported as JSON.
CHILD = """
import io, json, sys
sys.path.insert(0, {repo!r})
from cni_delguard import cli
argv, env = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out, err = io.BytesIO(), io.StringIO()
code = cli.main(argv, env, io.BytesIO(sys.argv[3].encode()), out, err)
print(json.dumps({{"code": code, "loaded": sorted(m for m in sys.modules
                                                 if m.split(".")[0] == "prometheus_client")}}))
"""


def loaded_by(argv, env, stdin=""):
    r = subprocess.run(
        [sys.executable, "-I", "-c", CHILD.format(repo=str(REPO)), json.dumps(argv),
         json.dumps(env), stdin],
        capture_output=True, text=True, timeout=60, check=True,
    )
    return json.loads(r.stdout)


def test_the_plugins_skip_path_does_not_load_prometheus_client(tmp_path):
    conf = {"cniVersion": "1.0.0", "name": "n", "type": "cni-delguard",
            "delegate": {"type": "bridge"}, "stateDir": str(tmp_path / "s"),
            "logFile": str(tmp_path / "log")}
    env = {"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "c1", "CNI_IFNAME": "eth0",
           "CNI_NETNS": "/proc/self/ns/net", "CNI_PATH": str(tmp_path)}
    got = loaded_by([], env, json.dumps(conf))
    assert got == {"code": 0, "loaded": []}


def test_the_ready_probe_does_not_load_prometheus_client(tmp_path):
    got = loaded_by(["ready", "--root", str(tmp_path)], {})
    assert got["code"] == 10  # nothing there: not guarded, and said so
    assert got["loaded"] == []


def test_stats_prometheus_does_load_it(tmp_path):
    """The check above can fail: the path that renders does load the library."""
    got = loaded_by(["stats", "--log-file", str(tmp_path / "log"), "--state-dir",
                     str(tmp_path / "s"), "--prometheus", str(tmp_path / "m.prom")], {})
    assert got["code"] == 0 and "prometheus_client" in got["loaded"]
