"""installer/kustomize/components/monitoring: the monitoring overlay renders (kubectl kustomize)
into objects the API server would accept, its DaemonSet serves on the node's IP the port its
PodMonitor names, its settings reach every object they name, promtool accepts the rules and passes
their unit tests (each alert fires in one case and stays silent in another, each failure of issue
27 among them), every rule is scoped to the job, and the dashboard asks only for series the guard
exports, per node.

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
from cni_delguard.monitoring import endpoint, series
from tests.support.kustomize import kubectl, render, render_all

from .test_manifests import VERSIONS, pod

REPO = Path(__file__).resolve().parents[2]
COMPONENT = REPO / "installer/kustomize/components/monitoring"
OVERLAY = REPO / "installer/kustomize/overlays/monitoring"
ALERT_TESTS = Path(__file__).parent / "data/monitoring/alerts-test.yaml"
JOB = 'job="cni-delguard"'
RULES = OVERLAY / "prometheusrule.yaml"  # rendered from the template by tools/render.py
RENDER = REPO / "tools/render.py"
# Series a query may use that are not the guard's own: Prometheus', the library's, and
# kube-state-metrics' (the nodes, their readiness, the DaemonSet's pods).
OTHERS = {"up", "process_cpu_seconds_total", "process_resident_memory_bytes",
          "process_start_time_seconds"}
KSM = {"kube_node_info", "kube_node_status_condition", "kube_pod_info"}
RECORDED = re.compile(r"\bcni_delguard:[a-z_]+\b")


def exposed_names() -> set[str]:
    """Every name the guard's series are stored under (a histogram's three)."""
    names = set()
    for s in series.SERIES:
        if s.kind == series.HISTOGRAM:
            names |= {f"{s.exposed}_bucket", f"{s.exposed}_count", f"{s.exposed}_sum"}
        else:
            names.add(s.exposed)
    return names


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} missing: tools/install-deps.sh test installs Debian's prometheus")
        pytest.skip(f"no {name} (Debian's prometheus: tools/install-deps.sh test)")
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


def test_the_port_is_the_same_everywhere_and_bound_to_the_nodes_ip(docs):
    ds = docs["DaemonSet"]
    (c,) = pod(ds)["containers"]
    args = build_parser(sys.stdout, sys.stderr).parse_args(c["args"])
    assert args.watch and args.metrics_address == "[$(HOST_IP)]:10647"
    # Kubernetes expands $(HOST_IP) from the container's env, which the downward API fills.
    (env,) = [e for e in c["env"] if e["name"] == "HOST_IP"]
    assert env["valueFrom"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
    host, port = endpoint.parse_address(endpoint.expand(args.metrics_address,
                                                        {"HOST_IP": "10.0.0.7"}))
    assert (host, port) == ("10.0.0.7", endpoint.DEFAULT_PORT)  # the node's IP only
    (declared,) = c["ports"]
    assert declared == {"name": "metrics", "containerPort": port, "protocol": "TCP"}
    # No prometheus.io annotations: a second, annotation-discovered job would double every alert.
    assert "annotations" not in ds["spec"]["template"]["metadata"]
    spec = docs["PodMonitor"]["spec"]
    (ep,) = spec["podMetricsEndpoints"]
    assert (ep["port"], ep["path"]) == ("metrics", endpoint.PATH)
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert labels[spec["jobLabel"]] == "cni-delguard"  # the job every rule asks for
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"} in (
        ep["relabelings"])


def test_the_plain_scrape_config_is_the_podmonitors_job():
    """Without prometheus-operator: the same job, the same port, path, interval and labels."""
    (job,) = yaml.safe_load((COMPONENT / "scrape-config.yaml").read_text())
    pm = yaml.safe_load((COMPONENT / "podmonitor.yaml").read_text())["spec"]
    (ep,) = pm["podMetricsEndpoints"]
    assert job["job_name"] == "cni-delguard"
    assert (job["scrape_interval"], job["scrape_timeout"], job["metrics_path"]) == (
        ep["interval"], ep["scrapeTimeout"], ep["path"])
    (sd,) = job["kubernetes_sd_configs"]
    (selector,) = sd["selectors"]
    ((key, value),) = pm["selector"]["matchLabels"].items()
    assert selector == {"role": "pod", "label": f"{key}={value}"}
    relabel = {r.get("target_label"): r for r in job["relabel_configs"]}
    assert relabel[None] == {"source_labels": ["__meta_kubernetes_pod_container_port_name"],
                             "regex": ep["port"], "action": "keep"}
    assert relabel["node"]["source_labels"] == ["__meta_kubernetes_pod_node_name"]
    assert set(relabel) == {None, "node", "namespace", "pod"}


def test_the_component_adds_the_endpoint_and_changes_nothing_else(docs):
    mon, plain = json.loads(json.dumps(docs["DaemonSet"])), render("watch")
    (c,) = pod(mon)["containers"]
    assert c["args"][-2:] == ["--metrics-address", "[$(HOST_IP)]:10647"]
    args = build_parser(sys.stdout, sys.stderr).parse_args(c["args"])
    c["args"] = c["args"][:-2]
    # The readiness probe reads the watcher's heartbeat: not Ready while the port is another's.
    probe = c["readinessProbe"]["exec"]["command"]
    assert probe[-2:] == ["--live-file", args.live_file]
    c["readinessProbe"]["exec"]["command"] = probe[:-2]
    del c["ports"]
    del c["env"]
    assert mon == plain


def settings() -> dict:
    return yaml.safe_load((OVERLAY / "settings.yaml").read_text())


def runbook_urls(docs) -> dict[str, str]:
    return {r["alert"]: r["annotations"]["runbook_url"]
            for g in docs["PrometheusRule"]["spec"]["groups"] for r in g["rules"] if "alert" in r}


def test_the_settings_reach_every_object_they_name(docs):
    spec = settings()["spec"]
    base = spec["runbookBaseURL"]
    # Relative to the repository: the project names no public home of its own by default
    # (packaging/project.env); an on-call's own is set here (the test below).
    assert base == "docs/runbooks.md"
    for alert, url in runbook_urls(docs).items():
        assert url == f"{base}#{alert.lower()}", alert
    for kind in ("PodMonitor", "PrometheusRule"):
        assert docs[kind]["metadata"]["labels"] == spec["labels"], kind
    # A local-config object: read by kustomize, never applied.
    assert "MonitoringSettings" not in docs


def test_other_settings_change_what_they_name_and_nothing_else(docs, tmp_path):
    """An overlay of one's own (kube-prometheus-stack's release label, runbooks on a wiki):
    its settings.yaml beside the component is all it takes."""
    own = tmp_path / "own"
    own.mkdir()
    mine = settings()
    mine["spec"]["runbookBaseURL"] = "https://wiki.example/ops/cni-delguard"
    mine["spec"]["labels"]["release"] = "kube-prometheus-stack"
    (own / "settings.yaml").write_text(yaml.safe_dump(mine))
    render_rules(own, "--write")
    rel = os.path.relpath(REPO / "installer/kustomize", own)
    (own / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [f"{rel}/overlays/watch", "settings.yaml", "prometheusrule.yaml"],
        "components": [f"{rel}/components/monitoring"],
    }))
    r = subprocess.run([kubectl(), "kustomize", str(own)], capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    found = {d["kind"]: d for d in yaml.safe_load_all(r.stdout) if d}
    for alert, url in runbook_urls(found).items():
        assert url == f"https://wiki.example/ops/cni-delguard#{alert.lower()}"
    for kind in ("PodMonitor", "PrometheusRule"):
        assert found[kind]["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        assert found[kind]["spec"] == docs[kind]["spec"] or kind == "PrometheusRule"
    assert "release" not in found["DaemonSet"]["metadata"].get("labels", {})
    assert found["DaemonSet"] == docs["DaemonSet"]


def render_rules(directory: Path, *options: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, str(RENDER), *options, "--overlay", str(directory)],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode in (0, 1), r.stderr
    return r


def test_the_podmonitor_scrapes_at_the_interval_the_rules_are_for(docs):
    interval = docs["PrometheusRule"]["metadata"]["annotations"]["cni-delguard/scrape-interval"]
    assert interval == settings()["spec"]["scrapeInterval"]
    assert {e["interval"] for e in docs["PodMonitor"]["spec"]["podMetricsEndpoints"]} == {interval}


def test_every_alert_carries_the_daemonsets_namespace(tmp_path):
    """A static label, so that a route on the namespace takes every alert, the fleet-wide ones
    too: the DaemonSet's namespace, also when an overlay moves it."""
    own = tmp_path / "own"
    shutil.copytree(OVERLAY, own)
    rel = os.path.relpath(REPO / "installer/kustomize", own)
    kustomization = yaml.safe_load((own / "kustomization.yaml").read_text())
    kustomization["resources"][0] = f"{rel}/overlays/watch"
    kustomization["components"] = [f"{rel}/components/monitoring"]
    kustomization["namespace"] = "net-guard"
    (own / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    r = subprocess.run([kubectl(), "kustomize", str(own)], capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    (rule,) = [d for d in yaml.safe_load_all(r.stdout) if d and d["kind"] == "PrometheusRule"]
    alerts = [x for g in rule["spec"]["groups"] for x in g["rules"] if "alert" in x]
    assert alerts and {a["labels"]["namespace"] for a in alerts} == {"net-guard"}


def rules_file(docs, tmp_path) -> Path:
    path = tmp_path / "cni-delguard.rules.yml"
    path.write_text(yaml.safe_dump(docs["PrometheusRule"]["spec"]))
    return path


def test_promtool_accepts_the_rules(docs, tmp_path):
    r = subprocess.run([tool("promtool"), "check", "rules", str(rules_file(docs, tmp_path))],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    count = sum(len(g["rules"]) for g in docs["PrometheusRule"]["spec"]["groups"])
    assert f"SUCCESS: {count} rules found" in r.stdout


def test_promtool_rejects_a_broken_rule(docs, tmp_path):
    """The check above can fail."""
    broken = json.loads(json.dumps(docs))
    broken["PrometheusRule"]["spec"]["groups"][0]["rules"][0]["expr"] = "cni_delguard_ready =="
    r = subprocess.run([tool("promtool"), "check", "rules", str(rules_file(broken, tmp_path))],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode != 0


def alert_names(docs) -> set[str]:
    return {r["alert"] for g in docs["PrometheusRule"]["spec"]["groups"] for r in g["rules"]
            if "alert" in r}


def test_each_alert_fires_in_one_case_and_stays_silent_in_another(docs):
    cases = yaml.safe_load(ALERT_TESTS.read_text())
    fires, silent = set(), set()
    for test in cases["tests"]:
        for case in test["alert_rule_test"]:
            (fires if case.get("exp_alerts") else silent).add(case["alertname"])
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
        if rule.get("alert") == "CniDelguardStrictDelStuck":
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
    known = exposed_names() | OTHERS
    used = {m for e in dashboard_exprs() for m in NAME.findall(e)}
    assert used and used <= known
    for must in ("cni_delguard_ready", "cni_delguard_stuck_strict_dels",
                 "cni_delguard_decisions_total", "cni_delguard_delegate_seconds_bucket", "up"):
        assert must in used
    assert docs["ConfigMap"]["data"]["dashboard.json"] == (COMPONENT / "dashboard.json").read_text()
    assert docs["ConfigMap"]["metadata"]["labels"] == {"grafana_dashboard": "1"}


def panel(title: str) -> dict:
    (found,) = [p for p in dashboard()["panels"] if p.get("title") == title]
    return found


def test_the_dashboard_reads_only_what_the_rules_record(docs):
    recorded = {r["record"] for g in docs["PrometheusRule"]["spec"]["groups"] for r in g["rules"]
                if "record" in r}
    used = {m for e in dashboard_exprs() for m in RECORDED.findall(e)}
    assert used and used <= recorded


def test_the_node_list_is_the_nodes_expected_to_be_guarded():
    """Every node the DaemonSet has a pod on (kube-state-metrics, through the recording rule),
    so a node without a watcher is listed too; not only the nodes that have a target."""
    (variable,) = [v for v in dashboard()["templating"]["list"] if v["name"] == "node"]
    assert variable["query"]["query"] == "label_values(cni_delguard:node_expected, node)"
    table = panel("Nodes")
    assert "cni_delguard:node_unguarded" in table["targets"][0]["expr"]


def test_nodes_not_guarded_counts_what_the_fleet_alert_counts(docs):
    """The stat and CniDelguardFleetNotGuarded read one recorded series (the promtool case
    12-dashboard-agrees evaluates both)."""
    (target,) = panel("Nodes not guarded")["targets"]
    fleet = rule_exprs(docs)["CniDelguardFleetNotGuarded"]
    recorded = "cni_delguard:node_unguarded"
    assert recorded in target["expr"] and recorded in fleet


STATE = re.compile(r'reason="([a-z-]+)"')


def test_a_state_timeline_shows_each_nodes_ready_state_over_time():
    timeline = panel("Ready state per node")
    assert timeline["type"] == "state-timeline"
    (target,) = timeline["targets"]
    assert set(STATE.findall(target["expr"])) == set(series.READY_REASONS.values())
    mappings = timeline["fieldConfig"]["defaults"]["mappings"]
    texts = {m["options"][k]["text"] for m in mappings for k in m["options"]}
    assert set(series.READY_REASONS.values()) | {"no watcher"} == texts


def overrides(table: dict) -> dict[str, dict[str, object]]:
    return {o["matcher"]["options"]: {p["id"]: p["value"] for p in o["properties"]}
            for o in table["fieldConfig"]["overrides"]}


def test_the_node_table_sorts_by_state_and_shows_times_as_times():
    """Sorted by a number (not guarded first), not by the reason as text; ages are durations
    and "since" a time, never raw seconds."""
    table = panel("Nodes")
    (sort,) = table["transformations"][-1]["options"]["sort"]
    by_field = overrides(table)
    assert sort == {"field": "state", "desc": True}
    assert {m["type"] for m in by_field["state"]["mappings"]} == {"value"}
    assert by_field["since"]["unit"] == "dateTimeFromNow"
    for age in ("oldest attempted ADD", "values read"):
        assert by_field[age]["unit"] == "s", age


def rule_exprs(docs) -> dict[str, str]:
    """Every rule's expression, by its alert's or its recording's name."""
    return {r.get("alert") or r["record"]: r["expr"]
            for g in docs["PrometheusRule"]["spec"]["groups"] for r in g["rules"]}


def test_the_rules_ask_only_for_series_that_exist(docs):
    known = exposed_names() | OTHERS | KSM
    used = {m for e in rule_exprs(docs).values() for m in NAME.findall(e)}
    assert used <= known and "cni_delguard_ready" in used


SELECTOR = re.compile(r"\b(cni_delguard_[a-z_]+|up)\b(\{[^}]*\})?")


@pytest.mark.parametrize("alert", sorted(rule_exprs(
    {"PrometheusRule": yaml.safe_load(RULES.read_text())})))
def test_every_rule_asks_for_the_cni_delguard_job_only(docs, alert):
    """The same series from node-exporter's textfile or an annotation-discovered job must never
    raise a second alert (the promtool cases show it for the alerts that had the doubles). A
    rule may read a recorded series of ours instead, which asks the same of its own."""
    exprs = rule_exprs(docs)
    expr = exprs[alert]
    selectors = SELECTOR.findall(expr)
    recorded = RECORDED.findall(expr)
    assert selectors or recorded, alert
    assert set(recorded) <= set(exprs), alert
    for name, matchers in selectors:
        assert JOB in matchers, f"{alert}: {name}{matchers}"


def test_every_per_node_alert_is_raised_by_node_and_never_by_pod(docs):
    """A pod replaced (a rollout) keeps its node: the alert neither restarts nor doubles. The
    annotations find the node's pod by its node, never by a pod name."""
    for rule in docs["PrometheusRule"]["spec"]["groups"][0]["rules"]:
        text = rule["expr"] + json.dumps(rule.get("annotations", {}))
        assert "$labels.pod" not in text and "$labels.instance" not in text, rule["alert"]
        for by in re.findall(r"by \(([^)]*)\)", rule["expr"]):
            assert "pod" not in by.split(", ") and "instance" not in by.split(", "), rule["alert"]
