"""The alerts as behaviour: each file tests/installer/data/monitoring/NN-*.yaml is a situation a
cluster goes through (a Prometheus restart, a scrape gap, a rollout, an uninstall, a zone outage,
a nodeSelector pool, a central ruler, a 60 s scrape interval, ...), run through `promtool test
rules` against the rules the monitoring overlay and the chart render. Its header says what it
shows; an `x-settings` key (taken out before promtool reads the file) gives the settings the rules
are rendered with (the chart's values and the overlay's settings: scrapeInterval, clusterLabel).

Only when and with which labels an alert fires is checked here: the rules' annotations are taken
out (data/monitoring/alerts-test.yaml checks their text). A `promql_expr_test` whose expr is
`dashboard: TITLE` evaluates that panel of the dashboard, so the dashboard is held to the alerts.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from delguard_build import rules

from .test_monitoring import COMPONENT, tool

DATA = Path(__file__).parent / "data" / "monitoring"
TEMPLATE = COMPONENT / "prometheusrule.template.yaml"
CASES = sorted(DATA.glob("[0-9][0-9]-*.yaml"))
# What a dashboard query's Grafana variables stand for here: every node, a 5-minute range.
GRAFANA = {"$node": ".*", "$__rate_interval": "1m", "$__range": "5m", "$__interval": "1m"}


def rules_for(settings: dict[str, str]) -> dict:
    """The rules as the monitoring overlay renders them for `settings` (its settings.yaml's
    keys: scrapeInterval, clusterLabel)."""
    chosen = rules.Settings(interval=settings.get("scrapeInterval", rules.DEFAULT_INTERVAL),
                            cluster=settings.get("clusterLabel", ""))
    return yaml.safe_load(rules.render(TEMPLATE.read_text(), chosen))["spec"]


def without_annotations(spec: dict) -> dict:
    for group in spec["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    return spec


def panel_query(title: str) -> str:
    board = json.loads((COMPONENT / "dashboard.json").read_text())
    (panel,) = [p for p in board["panels"] if p.get("title") == title]
    (target,) = panel["targets"]
    expr = target["expr"]
    for name, value in GRAFANA.items():
        expr = expr.replace(name, value)
    return expr


def prepared(case: Path, tmp_path: Path) -> Path:
    doc = yaml.safe_load(case.read_text())
    settings = doc.pop("x-settings", {})
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(without_annotations(rules_for(settings))))
    doc["rule_files"] = [str(rules)]
    for test in doc["tests"]:
        for expr_test in test.get("promql_expr_test", []):
            m = re.fullmatch(r"dashboard: (.+)", expr_test["expr"])
            if m:
                expr_test["expr"] = panel_query(m[1])
    path = tmp_path / case.name
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_the_alerts_behave(case, tmp_path):
    r = subprocess.run([tool("promtool"), "test", "rules", str(prepared(case, tmp_path))],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_each_case_says_what_it_shows():
    for case in CASES:
        first = case.read_text().splitlines()[0]
        assert re.match(r"# \d+\. \S", first), case.name
