"""charts/cni-delguard: the Helm chart, rendered by a real helm (each `helm` row of
peers/pins.tsv), renders what the kustomize overlays render, lints clean, and its schema refuses
bad values with a message that names them.

One source of truth: for every overlay there is a values file, ci/<overlay>-values.yaml, and the
chart rendered with it must hold the same objects as `kubectl kustomize` of the overlay, field by
field, once the labels only Helm adds and the order of named lists are normalized away
(tests/support/objdiff.py). The paths come to the chart from host/layouts.py and the monitoring
and OpenShift objects from the kustomize files themselves, through tools/generate-chart.py; a
test here fails when what it wrote is not current.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from cni_delguard import __version__
from cni_delguard.cli import build_parser
from cni_delguard.host import layouts
from cni_delguard.monitoring import endpoint
from delguard_build import rules
from tests.support.helm import CHART, by_kind
from tests.support.kustomize import KUSTOMIZE, render_all, render_dir
from tests.support.objdiff import HELM_LABELS, diff, diff_objects, key

from .test_manifests import OVERLAYS, VERSIONS, pod
from .test_monitoring import round_trip

REPO = Path(__file__).resolve().parents[2]
CI = CHART / "ci"
GENERATOR = REPO / "tools" / "generate-chart.py"
TEMPLATE = REPO / "installer/kustomize/components/monitoring/prometheusrule.template.yaml"
# ci/ values files that are no overlay's: every value away from its default at once.
EXTRAS = ("everything",)
VALUES = sorted(p.name.removesuffix("-values.yaml") for p in CI.glob("*-values.yaml"))


def values_file(name: str) -> Path:
    return CI / f"{name}-values.yaml"


@functools.cache
def _overlay(overlay: str) -> str:
    return json.dumps(render_all(overlay))


def overlay_docs(overlay: str) -> list[dict]:
    """The overlay's objects (kubectl kustomize runs once per overlay and session)."""
    return json.loads(_overlay(overlay))


def container(docs: list[dict]) -> dict:
    (c,) = pod(by_kind(docs)["DaemonSet"])["containers"]
    return c


def parse(argv: list[str]):
    return build_parser(sys.stdout, sys.stderr).parse_args(argv)


def test_each_overlay_has_a_values_file_and_each_values_file_an_overlay():
    assert set(VALUES) == set(OVERLAYS) | set(EXTRAS)


# Objects an overlay holds only so that `kubectl delete -k` deletes them (kubectl apply never
# removes an object; helm deletes what it no longer renders): the monitoring uninstall's PodMonitor
# and its emptied rules, which the chart does not render while holding.
ONLY_TO_BE_DELETED = {"uninstall-monitoring": {"PodMonitor", "PrometheusRule"}}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_chart_renders_what_the_overlay_renders(helm, overlay):
    chart = helm.render(values=values_file(overlay))
    gone = ONLY_TO_BE_DELETED.get(overlay, set())
    docs = [d for d in overlay_docs(overlay) if d["kind"] not in gone]
    assert diff_objects(docs, chart) == []
    assert not [d for d in chart if d["kind"] in gone]


def monitoring_overlay(tmp_path: Path, **settings: str) -> list[dict]:
    """overlays/monitoring with other settings, its rules rendered again for them
    (tools/render.py --overlay), as a user's copy of it would be."""
    own = tmp_path / "monitoring"
    shutil.copytree(KUSTOMIZE / "overlays/monitoring", own)
    doc = yaml.safe_load((own / "settings.yaml").read_text())
    doc["spec"].update(settings)
    (own / "settings.yaml").write_text(yaml.safe_dump(doc))
    r = subprocess.run([sys.executable, str(REPO / "tools/render.py"), "--write", "--overlay",
                        str(own)],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    kustomization = yaml.safe_load((own / "kustomization.yaml").read_text())
    rel = os.path.relpath(KUSTOMIZE, own)
    kustomization["resources"][0] = f"{rel}/overlays/watch"
    kustomization["components"] = [f"{rel}/components/monitoring"]
    (own / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return render_dir(own)


@pytest.mark.parametrize(
    ("settings", "values"),
    [
        pytest.param({"clusterLabel": "cluster"},
                     ["--set", "prometheus.prometheusRule.clusterLabel=cluster"], id="cluster"),
        pytest.param({"scrapeInterval": "60s"},
                     ["--set", "prometheus.podMonitor.interval=60s"], id="interval-60s"),
        pytest.param({"scrapeInterval": "1m30s", "clusterLabel": "k8s_cluster"},
                     ["--set", "prometheus.podMonitor.interval=1m30s",
                      "--set", "prometheus.prometheusRule.clusterLabel=k8s_cluster"],
                     id="both"),
    ],
)
def test_the_chart_renders_the_overlays_rules_for_the_same_settings(helm, tmp_path, settings,
                                                                   values):
    """The rules' template has two renderers, the chart's (Helm's templates) and the overlays'
    (delguard_build/rules.py): for the same settings, the same objects."""
    chart = helm.render(*values, values=values_file("monitoring"))
    assert diff_objects(monitoring_overlay(tmp_path, **settings), chart) == []


def test_the_rules_comparison_does_catch_another_interval(helm, tmp_path):
    """The comparison above can fail: rules rendered for 60 s are not the chart's for 15 s."""
    found = diff_objects(monitoring_overlay(tmp_path, scrapeInterval="60s"),
                         helm.render(values=values_file("monitoring")))
    assert [d for d in found if d.startswith(".PrometheusRule/cni-delguard.spec.groups")], found


@pytest.mark.parametrize(
    ("args", "field"),
    [
        pytest.param(
            ["--set", "resources.limits.memory=512Mi"],
            ".DaemonSet/cni-delguard.spec.template.spec.containers[0].resources.limits.memory",
            id="a-value",
        ),
        pytest.param(
            ["--set", "podLabels.team=net"],
            ".DaemonSet/cni-delguard.spec.template.metadata.labels.team",
            id="a-label-not-helms",
        ),
        pytest.param(
            ["--set", "extraArgs={--log-level,debug}"],
            ".DaemonSet/cni-delguard.spec.template.spec.containers[0].args",
            id="args-order-kept",
        ),
        pytest.param(
            ["--set", "dashboards.enabled=true"],
            ".ConfigMap/cni-delguard-dashboard",
            id="an-object-more",
        ),
    ],
)
def test_the_comparison_does_catch_a_drift(helm, args, field):
    """The guard above can fail: a chart that renders one field more or less than the overlay
    is named by that field."""
    found = diff_objects(overlay_docs("watch"), helm.render(*args, values=values_file("watch")))
    assert [d for d in found if d.startswith(field + ":")], found


@pytest.mark.parametrize("overlay", ["monitoring", "openshift"])
def test_the_labels_normalized_away_are_helms_and_on_every_object(helm, overlay):
    """Normalization drops Helm's own labels, no others: each object of the chart carries the
    overlay's labels and exactly those more (never in the pod template, see test_chart_upgrade)."""
    plain = {key(d): d["metadata"].get("labels", {}) for d in overlay_docs(overlay)}
    for doc in helm.render(values=values_file(overlay)):
        labels = doc["metadata"]["labels"]
        assert set(labels) - set(plain[key(doc)]) == HELM_LABELS, key(doc)
        assert labels["helm.sh/chart"] == "cni-delguard-" + labels["app.kubernetes.io/version"]


def test_the_diff_names_each_field_and_type():
    assert diff({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2}]}) == []
    assert diff({"a": 1}, {"a": "1"}) == [".a: 1 != '1'"]
    assert diff({"a": [1, {"b": 2}]}, {"a": [1, {"c": 2}]}) == [
        ".a[1].b: 2 != <absent>",
        ".a[1].c: <absent> != 2",
    ]


@pytest.mark.parametrize("values", VALUES)
def test_lint_strict_is_clean(helm, values):
    r = helm.run("lint", "--strict", str(CHART), "--values", str(values_file(values)))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[WARNING]" not in r.stdout and "[ERROR]" not in r.stdout, r.stdout


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        pytest.param("cni.layout=k4s", "at '/cni/layout': value must be one of 'auto', ",
                     id="layout-unknown"),
        pytest.param("prometheus.port=70000", "at '/prometheus/port': maximum", id="port-high"),
        pytest.param("prometheus.port=0", "at '/prometheus/port': minimum", id="port-zero"),
        pytest.param("mode=audit", "at '/mode': value must be one of '', 'enforce', 'observe'",
                     id="mode-unknown"),
        pytest.param("prometheus.address=node1.example", "at '/prometheus/address'",
                     id="address-not-an-ip"),
        pytest.param("prometheus.podmonitor.enabled=true",
                     "at '/prometheus': additional properties 'podmonitor' not allowed",
                     id="key-misspelt"),
        pytest.param("image.digest=latest", "at '/image/digest'", id="digest-not-sha256"),
        pytest.param("image.repository=a b", "at '/image/repository'", id="repository-spaced"),
        pytest.param("cni.hold=yes", "at '/cni/hold'", id="switch-not-boolean"),
    ],
)
def test_the_schema_refuses_a_bad_value_and_names_it(helm, setting, message):
    err = helm.refuses("--set", setting)
    assert "values don't meet the specifications of the schema" in err, err
    assert message in err, err


@pytest.mark.parametrize(
    "setting",
    [
        *(pytest.param(f"cni.layout={name}", id=name) for name in layouts.CHOICES),
        pytest.param("prometheus.port=65535", id="port-highest"),
        pytest.param("prometheus.port=1", id="port-lowest"),
        pytest.param("mode=observe", id="observe"),
        pytest.param("mode=enforce", id="enforce"),
        pytest.param("prometheus.address=10.0.0.7", id="ipv4"),
        pytest.param("prometheus.address=fd00::7", id="ipv6"),
    ],
)
def test_the_schema_takes_each_good_value(helm, setting):
    """The refusals above are the schema's, not a chart that refuses everything."""
    assert helm.render("--set", setting)


def test_the_schema_enum_is_every_layout_and_auto():
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["properties"]["cni"]["properties"]["layout"]["enum"] == list(layouts.CHOICES)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([], id="no-values"),
        pytest.param(["--set", "image.tag=1.0.0"], id="a-tag-alone"),
        pytest.param(["--set", "image.repository="], id="empty"),
    ],
)
def test_a_render_without_an_image_fails_naming_the_value(helm, args):
    """No public registry holds the image: a chart that rendered a default one would leave every
    node pulling what is not there. Without image.repository the render fails, and says which
    value to set and how."""
    err = helm.refuses(*args, values=None)
    assert "image.repository is not set" in err, err
    assert "--set image.repository=REGISTRY/cni-delguard" in err, err


def test_the_image_named_is_the_image_rendered(helm):
    """The refusal above is the missing value's, not a chart that refuses every image."""
    c = container(helm.render("--set", "image.repository=registry.example/net/cni-delguard",
                              values=None))
    assert c["image"] == f"registry.example/net/cni-delguard:{__version__}"


def test_a_pod_monitor_without_the_endpoint_is_refused(helm):
    err = helm.refuses("--set", "prometheus.podMonitor.enabled=true")
    assert "prometheus.podMonitor.enabled needs prometheus.enabled" in err, err


@pytest.mark.parametrize("values", VALUES)
def test_the_container_args_and_probe_are_the_clis(helm, values):
    """Whatever the values, the image's entrypoint (the binary) parses what the chart passes."""
    c = container(helm.render(values=values_file(values)))
    args = parse(c["args"])
    probe = c["readinessProbe"]["exec"]["command"]
    assert probe[0] == "/usr/lib/cni-delguard/cni-delguard"
    ready = parse(probe[1:])
    assert ready.command == "ready" and ready.root == args.root == "/host"
    assert ready.layout == args.layout
    assert ready.uninstalled == (args.command == "uninstall")
    if args.command == "install" and args.metrics_address:
        # Kubernetes expands $(HOST_IP) from the container's env (the downward API's hostIP).
        env = {e["name"]: "10.0.0.1" for e in c.get("env", []) if "fieldRef" in e["valueFrom"]}
        _, port = endpoint.parse_address(endpoint.expand(args.metrics_address, env))
        assert c["ports"] == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]


def test_holding_passes_none_of_the_installers_flags(helm):
    """Every value at once, then holding: the pod runs the uninstall overlay's command, which
    the binary parses (an installer flag would make it exit 2 on every node)."""
    c = container(helm.render("--set", "cni.hold=true", values=values_file("everything")))
    args = parse(c["args"])
    assert (args.command, args.hold, args.layout) == ("uninstall", True, "k3s")
    assert c["args"] == ["uninstall", "--root", "/host", "--hold", "--layout", "k3s"]
    assert "ports" not in c
    kinds = by_kind(helm.render("--set", "cni.hold=true", values=values_file("everything")))
    # Nothing to scrape, and a planned uninstall pages nobody: the PodMonitor and the rules go
    # (helm deletes them); the dashboard stays.
    assert {"PodMonitor", "PrometheusRule"}.isdisjoint(kinds)
    assert "ConfigMap" in kinds


@pytest.mark.parametrize(
    ("settings", "purges"),
    [
        pytest.param(["cni.hold=true", "cni.purge=true"], True, id="hold-and-purge"),
        pytest.param(["cni.hold=true"], False, id="hold-only"),
        pytest.param(["cni.purge=true"], False, id="purge-without-hold-does-nothing"),
    ],
)
def test_only_a_purging_hold_purges_and_writes_the_log_dir(helm, settings, purges):
    """cni.purge adds `--purge` to the hold's command (which the binary parses) and mounts the
    log's dir writable for it; otherwise the log's dir stays read-only."""
    args = [a for s in settings for a in ("--set", s)]
    c = container(helm.render(*args, values=values_file("watch")))
    assert ("--purge" in c["args"]) is purges
    if "cni.hold=true" in settings:
        assert parse(c["args"]).purge is purges
    (log,) = [m for m in c["volumeMounts"] if m["name"] == "log"]
    assert log.get("readOnly", False) is not purges


@pytest.mark.parametrize(
    ("home", "runbook_url", "expected"),
    [
        pytest.param("", "", "docs/runbooks.md", id="no-home-relative"),
        pytest.param("https://git.example/org/cni-delguard", "",
                     "https://git.example/org/cni-delguard/blob/v{v}/docs/runbooks.md",
                     id="home-this-version"),
        pytest.param("https://git.example/org/cni-delguard", "https://docs.example/rb.md",
                     "https://docs.example/rb.md", id="the-value-wins"),
    ],
)
def test_the_runbook_links_follow_the_projects_home(helm, tmp_path, home, runbook_url,
                                                    expected):
    """packaging/project.env's repository is the chart's `home` (tools/generate-chart.py);
    the alerts link this version's runbooks there unless prometheusRule.runbookUrl says where."""
    sys.path.insert(0, str(REPO / "tools"))
    import project

    chart = tmp_path / "cni-delguard"
    shutil.copytree(CHART, chart)
    spec = importlib.util.spec_from_file_location("generate_chart", GENERATOR)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    meta = chart / "Chart.yaml"
    meta.write_text(gen.chart_yaml(meta.read_text(), project.Home(repository=home)))
    docs = helm.render("--set", f"prometheus.prometheusRule.runbookUrl={runbook_url}",
                       chart=chart, values=values_file("monitoring"))
    rule = by_kind(docs)["PrometheusRule"]
    urls = {r["annotations"]["runbook_url"] for g in rule["spec"]["groups"] for r in g["rules"]
            if "runbook_url" in r.get("annotations", {})}
    version = yaml.safe_load(meta.read_text())["appVersion"]
    assert {u.split("#")[0] for u in urls} == {expected.format(v=version)}


def test_the_chart_refuses_a_cluster_older_than_the_schemas_it_is_checked_against(helm):
    oldest = VERSIONS[0]
    assert helm.render("--kube-version", oldest)
    major, minor, _ = oldest.split(".")
    err = helm.refuses("--kube-version", f"{major}.{int(minor) - 1}.0")
    assert "incompatible with Kubernetes" in err, err


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("values", VALUES)
def test_every_render_is_valid_against_the_kubernetes_schema(helm, values, version):
    for doc in helm.render(values=values_file(values)):
        if doc["apiVersion"] == "monitoring.coreos.com/v1":
            assert round_trip(doc) == doc  # prometheus-operator's own schema (test_monitoring)
        elif doc["kind"] != "SecurityContextConstraints":  # OpenShift's: not in the package
            kubernetes_validate.validate(doc, version, strict=True)


def everything(helm) -> dict[str, dict]:
    return by_kind(helm.render(values=values_file("everything")))


def test_every_value_renders_where_it_says(helm):
    """ci/everything-values.yaml: each value away from its default lands where values.yaml
    says (the overlays' files cover the defaults)."""
    docs = everything(helm)
    values = yaml.safe_load(values_file("everything").read_text())
    ds = docs["DaemonSet"]
    spec = pod(ds)
    c = container(list(docs.values()))
    image = values["image"]
    assert c["image"] == f"{image['repository']}@{image['digest']}"
    assert c["imagePullPolicy"] == image["pullPolicy"]
    assert spec["imagePullSecrets"] == values["imagePullSecrets"]
    args = parse(c["args"])
    assert (args.layout, args.uninstall_on_stop, args.mode) == ("k3s", True, "observe")
    assert args.metrics_address == "[fd00::10]:19647" and args.log_level == "debug"
    assert c["args"][-2:] == values["extraArgs"]
    assert c["securityContext"]["seLinuxOptions"] == values["securityContext"]["seLinuxOptions"]
    for name in ("nodeSelector", "tolerations", "affinity", "priorityClassName",
                 "terminationGracePeriodSeconds"):
        assert spec[name] == values[name], name
    # helm merges maps with the defaults: requests given, limits the default's
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    assert c["resources"] == {**defaults["resources"], **values["resources"]}
    template = ds["spec"]["template"]["metadata"]
    assert template["annotations"] == values["podAnnotations"]  # never prometheus.io/*
    assert template["labels"] == {"app.kubernetes.io/name": "cni-delguard", **values["podLabels"]}
    assert ds["spec"]["selector"] == {"matchLabels": {"app.kubernetes.io/name": "cni-delguard"}}
    assert ds["spec"]["updateStrategy"] == values["updateStrategy"]


def test_the_monitoring_values_reach_their_objects(helm):
    docs = everything(helm)
    values = yaml.safe_load(values_file("everything").read_text())["prometheus"]
    monitor, rule = docs["PodMonitor"], docs["PrometheusRule"]
    assert values["podMonitor"]["labels"].items() <= monitor["metadata"]["labels"].items()
    assert {e["interval"] for e in monitor["spec"]["podMetricsEndpoints"]} == {"30s"}
    assert values["prometheusRule"]["labels"].items() <= rule["metadata"]["labels"].items()
    # The rules as rendered for the values' interval and cluster label (the overlay's renderer).
    settings = rules.Settings(interval=values["podMonitor"]["interval"],
                              cluster=values["prometheusRule"]["clusterLabel"],
                              namespace=rule["metadata"]["namespace"])
    plain = yaml.safe_load(rules.render(TEMPLATE.read_text(), settings))
    assert rule["metadata"]["annotations"] == {"cni-delguard/scrape-interval": "30s"}
    alerts = [r for r in rule["spec"]["groups"][0]["rules"] if "alert" in r]
    urls = {r["alert"]: r["annotations"]["runbook_url"] for r in alerts}
    for r in plain["spec"]["groups"][0]["rules"]:
        if "alert" in r:
            section = r["annotations"]["runbook_url"].split("#", 1)[1]
            assert urls[r["alert"]] == f"{values['prometheusRule']['runbookUrl']}#{section}"
    # Only the links changed: the expressions and the Prometheus templates in the text are the
    # template's, never rendered by helm.
    stripped = copy.deepcopy(rule)
    for spec in (stripped["spec"], plain["spec"]):
        for r in spec["groups"][0]["rules"]:
            if "annotations" in r:
                r["annotations"]["runbook_url"] = "-"
    assert stripped["spec"] == plain["spec"]
    assert "by (cluster, job, namespace, node)" in json.dumps(stripped["spec"])
    board = docs["ConfigMap"]
    assert board["metadata"]["namespace"] == "monitoring"
    assert board["metadata"]["labels"]["grafana_dashboards"] == "cni"
    assert board["metadata"]["annotations"] == {"grafana_folder": "Networking"}
    component = REPO / "installer/kustomize/components/monitoring/dashboard.json"
    assert board["data"]["dashboard.json"] == component.read_text()


@pytest.mark.parametrize(
    ("args", "present"),
    [
        pytest.param(["--set", "prometheus.enabled=true"], True, id="serving"),
        pytest.param(["--set", "prometheus.enabled=true", "--set", "cni.hold=true"], False,
                     id="holding"),
    ],
)
def test_the_endpoint_is_served_only_by_an_installer(helm, args, present):
    """`uninstall --hold` has no metrics endpoint: holding drops the flag, the port and the
    node's IP from the downward API with it (a pod that would exit 2 on an unknown flag never
    runs). No prometheus.io/* annotation either way: it would double every alert."""
    c = container(helm.render(*args))
    assert ("--metrics-address" in c["args"]) is present
    assert ("ports" in c) is present
    assert ("env" in c) is present
    ds = by_kind(helm.render(*args))["DaemonSet"]
    assert "annotations" not in ds["spec"]["template"]["metadata"]


def test_the_openshift_objects_are_the_overlays_in_the_release_namespace(helm):
    docs = by_kind(helm.render(values=values_file("openshift"), namespace="cni-delguard"))
    account, scc = docs["ServiceAccount"], docs["SecurityContextConstraints"]
    assert account["metadata"]["namespace"] == "cni-delguard"
    assert scc["users"] == ["system:serviceaccount:cni-delguard:cni-delguard"]
    assert "namespace" not in scc["metadata"]  # cluster-scoped
    assert pod(docs["DaemonSet"])["serviceAccountName"] == account["metadata"]["name"]


def test_the_namespace_is_the_releases(helm):
    docs = helm.render(values=values_file("monitoring"), namespace="net-guard")
    assert {d["metadata"]["namespace"] for d in docs} == {"net-guard"}


def load_generator():
    spec = importlib.util.spec_from_file_location("generate_chart", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generator_finds_a_stale_file_and_writes_it_again(tmp_path, monkeypatch):
    generator = load_generator()
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    monkeypatch.setattr(generator, "CHART", chart)
    assert generator.main(["--check"]) == 0
    layouts_file = chart / "files/layouts.yaml"
    layouts_file.write_text(layouts_file.read_text().replace("/opt/cni/bin", "/opt/cni/bin2"))
    (chart / "files/dashboard.json").unlink()
    assert generator.main(["--check"]) == 1
    assert "/opt/cni/bin2" in layouts_file.read_text()  # --check changes nothing
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0
    assert layouts_file.read_bytes() == (CHART / "files/layouts.yaml").read_bytes()


def test_the_chart_version_is_the_projects():
    from cni_delguard import __version__

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == __version__


def test_control_plane_nodes_are_an_explicit_choice(helm):
    """Issue 38, item 3: `controlPlane` (default true, as the overlays) says whether the pods run
    on control-plane nodes; false adds a DoesNotExist term on node-role.kubernetes.io/control-plane
    to each of the affinity's nodeSelectorTerms, keeping the user's own expressions."""
    off = {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}
    terms = [pod(by_kind(helm.render(*argv))["DaemonSet"])["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        for argv in ((), ("--set", "controlPlane=false"))]
    assert all(off not in term["matchExpressions"] for term in terms[0])
    assert [term["matchExpressions"] for term in terms[1]] == [
        [*term["matchExpressions"], off] for term in terms[0]]
