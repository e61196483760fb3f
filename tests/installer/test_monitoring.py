"""installer/kustomize/components/monitoring: the monitoring overlay renders (kubectl kustomize)
into objects the API server would accept, its DaemonSet serves the port its PodMonitor and
annotations name, promtool accepts the rules and passes their unit tests (each alert fires in one
case and stays silent in another), and the dashboard asks only for series the guard exports.

The PodMonitor and PrometheusRule are checked against prometheus-operator's own schemas (the
models cloudcoil generates from its CRDs, pinned in pyproject's dev extra): a field that is not in
the schema would be dropped by the model, so the check is that nothing is.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from cni_delguard.cli import build_parser
from cni_delguard.node import endpoint
from cni_delguard.ops import series
from tests.support.kustomize import render, render_all

from .test_manifests import VERSIONS, pod

REPO = Path(__file__).resolve().parents[2]
COMPONENT = REPO / "installer/kustomize/components/monitoring"
ALERT_TESTS = Path(__file__).parent / "data/monitoring/alerts-test.yaml"
# Series a query may use that are not the guard's own: Prometheus' and the library's.
OTHERS = {"up", "process_cpu_seconds_total", "process_resident_memory_bytes"}


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} missing: tools/install-test-deps.sh installs Debian's prometheus")
        pytest.skip(f"no {name} (Debian's prometheus: tools/install-test-deps.sh)")
    return found


@pytest.fixture(scope="module")
def docs() -> dict[str, dict]:
    found = {d["kind"]: d for d in render_all("monitoring")}
    assert sorted(found) == ["ConfigMap", "DaemonSet", "PodMonitor", "PrometheusRule"]
    return found


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", ["DaemonSet", "ConfigMap"])
def test_the_kubernetes_kinds_are_valid(docs, kind, version):
    kubernetes_validate.validate(docs[kind], version, strict=True)


def operator_model(kind: str):
    from cloudcoil.models.prometheus_operator import v1

    return getattr(v1, kind)


def round_trip(doc: dict) -> dict:
    model = operator_model(doc["kind"]).model_validate(doc)
    return model.model_dump(by_alias=True, exclude_unset=True, mode="json")


@pytest.mark.parametrize("kind", ["PodMonitor", "PrometheusRule"])
def test_the_operator_kinds_are_valid_against_its_schema(docs, kind):
    assert round_trip(docs[kind]) == docs[kind]


def test_the_schema_check_does_catch_a_typo(docs):
    bad = json.loads(json.dumps(docs["PodMonitor"]))
    bad["spec"]["podMetricsEndpoints"][0]["intervall"] = "15s"
    assert round_trip(bad) != bad
    bad["spec"]["podMetricsEndpoints"][0]["interval"] = "15 seconds"
    with pytest.raises(ValueError, match="interval"):
        round_trip(bad)


def test_the_port_is_the_same_everywhere(docs):
    ds = docs["DaemonSet"]
    (c,) = pod(ds)["containers"]
    args = build_parser(sys.stdout, sys.stderr).parse_args(c["args"])
    assert args.watch and args.metrics_address == ":10647"
    host, port = endpoint.parse_address(args.metrics_address)
    assert (host, port) == ("", endpoint.DEFAULT_PORT)  # every address, the documented port
    (declared,) = c["ports"]
    assert declared == {"name": "metrics", "containerPort": port, "protocol": "TCP"}
    notes = ds["spec"]["template"]["metadata"]["annotations"]
    assert notes == {"prometheus.io/scrape": "true", "prometheus.io/port": str(port),
                     "prometheus.io/path": endpoint.PATH}
    spec = docs["PodMonitor"]["spec"]
    (ep,) = spec["podMetricsEndpoints"]
    assert (ep["port"], ep["path"]) == ("metrics", endpoint.PATH)
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert labels[spec["jobLabel"]] == "cni-delguard"  # the job CniDelguardMetricsDown names


def test_the_component_adds_the_endpoint_and_changes_nothing_else(docs):
    mon, plain = json.loads(json.dumps(docs["DaemonSet"])), render("watch")
    (c,) = pod(mon)["containers"]
    assert c["args"][-2:] == ["--metrics-address", ":10647"]
    c["args"] = c["args"][:-2]
    del c["ports"]
    del mon["spec"]["template"]["metadata"]["annotations"]
    assert mon == plain


def rules_file(docs, tmp_path) -> Path:
    path = tmp_path / "cni-delguard.rules.yml"
    path.write_text(yaml.safe_dump(docs["PrometheusRule"]["spec"]))
    return path


def test_promtool_accepts_the_rules(docs, tmp_path):
    r = subprocess.run([tool("promtool"), "check", "rules", str(rules_file(docs, tmp_path))],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 7 rules found" in r.stdout


def test_promtool_rejects_a_broken_rule(docs, tmp_path):
    """The check above can fail."""
    broken = json.loads(json.dumps(docs))
    broken["PrometheusRule"]["spec"]["groups"][0]["rules"][0]["expr"] = "cni_delguard_ready_code =="
    r = subprocess.run([tool("promtool"), "check", "rules", str(rules_file(broken, tmp_path))],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode != 0


def alert_names(docs) -> set[str]:
    return {r["alert"] for g in docs["PrometheusRule"]["spec"]["groups"] for r in g["rules"]}


def test_each_alert_fires_in_one_case_and_stays_silent_in_another(docs):
    cases = yaml.safe_load(ALERT_TESTS.read_text())
    fires, silent = set(), set()
    for test in cases["tests"]:
        for case in test["alert_rule_test"]:
            (fires if case.get("exp_alerts") else silent).add(case["alertname"])
    # A case that expects some nodes to fire and not others is silent for those others: the
    # Errors and MetricsDown cases carry nodes that must not fire beside the ones that must.
    silent |= {"CniDelguardErrors", "CniDelguardMetricsDown"}
    assert fires == alert_names(docs)
    assert silent == alert_names(docs)


def test_promtool_unit_tests_of_the_alerts_pass(docs, tmp_path):
    cases = yaml.safe_load(ALERT_TESTS.read_text())
    cases["rule_files"] = [str(rules_file(docs, tmp_path))]
    path = tmp_path / "alerts-test.yaml"
    path.write_text(yaml.safe_dump(cases))
    r = subprocess.run([tool("promtool"), "test", "rules", str(path)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_promtool_unit_tests_can_fail(docs, tmp_path):
    """A rule that never fires fails its unit test: the tests above have teeth."""
    cases = yaml.safe_load(ALERT_TESTS.read_text())
    weakened = json.loads(json.dumps(docs))
    for rule in weakened["PrometheusRule"]["spec"]["groups"][0]["rules"]:
        if rule["alert"] == "CniDelguardStrictDelStuck":
            rule["expr"] = "cni_delguard_stuck_strict_dels > 100"
    cases["rule_files"] = [str(rules_file(weakened, tmp_path))]
    path = tmp_path / "alerts-test.yaml"
    path.write_text(yaml.safe_dump(cases))
    r = subprocess.run([tool("promtool"), "test", "rules", str(path)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode != 0 and "CniDelguardStrictDelStuck" in r.stdout + r.stderr


def dashboard() -> dict:
    return json.loads((COMPONENT / "dashboard.json").read_text())


def dashboard_exprs() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p["targets"]]


NAME = re.compile(r"\b(?:cni_delguard_[a-z_]+|process_[a-z_]+|up)\b")


def test_the_dashboard_asks_only_for_series_that_exist(docs):
    known = {s.exposed for s in series.SERIES} | OTHERS
    used = {m for e in dashboard_exprs() for m in NAME.findall(e)}
    assert used and used <= known
    for must in ("cni_delguard_node_guarded", "cni_delguard_stuck_strict_dels",
                 "cni_delguard_decisions_total"):
        assert must in used
    assert docs["ConfigMap"]["data"]["dashboard.json"] == (COMPONENT / "dashboard.json").read_text()
    assert docs["ConfigMap"]["metadata"]["labels"] == {"grafana_dashboard": "1"}


def test_the_rules_ask_only_for_series_that_exist(docs):
    known = {s.exposed for s in series.SERIES} | OTHERS
    exprs = [r["expr"] for g in docs["PrometheusRule"]["spec"]["groups"] for r in g["rules"]]
    used = {m for e in exprs for m in NAME.findall(e)}
    assert used <= known and "cni_delguard_node_guarded" in used
