"""The Alertmanager advice (components/monitoring/alertmanager.yaml, shown in docs/monitoring.md):
amtool accepts it, every cni-delguard alert routes to the network's receiver by its namespace, a
storm of per-node alerts is one group, the fleet alert inhibits the per-node ones of its cluster,
and kube-prometheus' KubeNodeNotReady inhibits what cni-delguard says about that node, in a real
Alertmanager (Debian's) holding the alerts as the rules raise them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from delguard_build import rules
from tests.support.alertmanager import api, running
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
COMPONENT = REPO / "installer/kustomize/components/monitoring"
SNIPPET = COMPONENT / "alertmanager.yaml"
TEMPLATE = COMPONENT / "prometheusrule.template.yaml"
RECEIVER = "node-network"
BY = re.compile(r"\bby \(([^)]*)\)")


def amtool() -> str:
    found = shutil.which("amtool")
    if found is None:
        pytest.fail("no amtool: tools/install-deps.sh test installs prometheus-alertmanager")
    return found


def config() -> dict:
    return yaml.safe_load(SNIPPET.read_text())


def alert_labels(cluster: str = "") -> dict[str, dict[str, str]]:
    """Each alert's labels as its rule raises it (rendered for `cluster`): its static labels and
    those of its expression's first `by` (a node, a reason...), with a value standing for any."""
    spec = yaml.safe_load(rules.render(TEMPLATE.read_text(), rules.Settings(cluster=cluster)))
    found = {}
    for rule in spec["spec"]["groups"][0]["rules"]:
        if "alert" not in rule:
            continue
        labels = {"alertname": rule["alert"], **rule["labels"]}
        m = BY.search(rule["expr"])
        for name in (m[1].split(", ") if m and m[1] else []):
            labels.setdefault(name, {"node": "n1", "cluster": "a"}.get(name, "x"))
        found[rule["alert"]] = labels
    return found


def test_amtool_accepts_the_advice():
    r = subprocess.run([amtool(), "check-config", str(SNIPPET)], capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def routes_to(labels: dict[str, str]) -> str:
    r = subprocess.run([amtool(), "config", "routes", "test", f"--config.file={SNIPPET}",
                        *(f"{k}={v}" for k, v in labels.items())],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip()


@pytest.mark.parametrize("alert", sorted(alert_labels()))
def test_every_alert_routes_to_the_networks_receiver_by_its_namespace(alert):
    """The fleet-wide alerts too: they carry the namespace as a static label."""
    assert routes_to(alert_labels()[alert]) == RECEIVER


def test_the_route_does_send_another_namespace_elsewhere():
    """The check above can fail: an alert without the namespace goes to the default."""
    labels = {k: v for k, v in alert_labels()["CniDelguardFleetNotGuarded"].items()
              if k != "namespace"}
    assert routes_to(labels) == "default"


def post(url: str, *alerts: dict[str, str]) -> None:
    api(url, "alerts", [{"labels": a} for a in alerts])


def inhibited(url: str) -> set[tuple[str, str, str]]:
    """(alertname, cluster, node) of each alert Alertmanager holds inhibited."""
    alerts = api(url, "alerts")
    assert isinstance(alerts, list)
    return {(a["labels"]["alertname"], a["labels"].get("cluster", ""), a["labels"].get("node", ""))
            for a in alerts if a["status"]["inhibitedBy"]}


def held(url: str, count: int) -> bool:
    alerts = api(url, "alerts")
    assert isinstance(alerts, list)
    return len(alerts) == count


def test_the_fleet_alert_stands_for_the_per_node_ones_of_its_cluster(tmp_path):
    labels = alert_labels(cluster="cluster")
    node_alerts = ("CniDelguardPluginBroken", "CniDelguardNodeNotGuarded",
                   "CniDelguardNodeWithoutTarget", "CniDelguardMetricsDown",
                   "CniDelguardMetricsStale")
    sent = [labels["CniDelguardFleetNotGuarded"], labels["CniDelguardStrictDelStuck"]]
    sent += [labels[a] for a in node_alerts]
    sent += [{**labels["CniDelguardPluginBroken"], "cluster": "b"}]  # another cluster's
    with running(tmp_path, config()) as url:
        post(url, *sent)
        wait_for(lambda: inhibited(url) == {(a, "a", "n1") for a in node_alerts},
                 "the per-node alerts of cluster a inhibited", 60, every=0.2,
                 detail=lambda: str(api(url, "alerts")))


def test_a_node_that_is_not_ready_is_not_cni_delguards_to_report(tmp_path):
    labels = alert_labels()
    not_ready = {"alertname": "KubeNodeNotReady", "node": "n3", "namespace": "monitoring",
                 "severity": "warning"}
    down = {**labels["CniDelguardMetricsDown"], "node": "n3"}
    other = {**labels["CniDelguardMetricsDown"], "node": "n4"}
    with running(tmp_path, config()) as url:
        post(url, not_ready, down, other, labels["CniDelguardVersionSkew"])  # no node
        wait_for(lambda: held(url, 4), "the four alerts held", 60, every=0.2)
        wait_for(lambda: inhibited(url) == {("CniDelguardMetricsDown", "", "n3")},
                 "only n3's MetricsDown inhibited", 60, every=0.2,
                 detail=lambda: str(api(url, "alerts")))


def test_ten_nodes_whose_plugin_went_missing_are_one_group(tmp_path):
    broken = alert_labels()["CniDelguardPluginBroken"]
    with running(tmp_path, config()) as url:
        post(url, *({**broken, "node": f"n{i}"} for i in range(10)))

        def groups() -> list:
            found = api(url, "alerts/groups")
            assert isinstance(found, list)
            return found

        wait_for(lambda: sum(len(g["alerts"]) for g in groups()) == 10, "ten alerts grouped",
                 60, every=0.2)
        (group,) = groups()
        assert group["receiver"]["name"] == RECEIVER


def test_the_docs_show_the_advice_as_it_is_tested():
    text = (REPO / "docs/monitoring.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    body = "".join(line + "\n" for line in SNIPPET.read_text().splitlines()
                   if not line.startswith("#"))
    assert body in blocks
