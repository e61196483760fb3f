"""delguard_build/rules.py: the rules' tokens filled in for a scrape interval, a cluster
label and a namespace, each as the Helm chart fills them (tests/installer/test_chart.py renders
both and compares the objects; here, each token and each refusal on its own)."""

from __future__ import annotations

import pytest

from delguard_build import rules


@pytest.mark.parametrize(
    ("interval", "template", "expected"),
    [
        pytest.param("15s", "[${4i}]", "[1m]", id="four-intervals-a-minute"),
        pytest.param("15s", "[${1i}]", "[15s]", id="one-interval"),
        pytest.param("60s", "for: ${8i}", "for: 8m", id="60s"),
        pytest.param("1m", "[${60i}]", "[1h]", id="an-hour"),
        pytest.param("1m30s", "[${4i}]", "[6m]", id="compound"),
        pytest.param("45s", "[${2i}]", "[90s]", id="seconds-when-minutes-do-not-divide"),
        pytest.param("15s", "< ${40i:seconds}", "< 600", id="seconds"),
        pytest.param("1m", "${interval}", "1m", id="as-set"),
    ],
)
def test_windows_are_multiples_of_the_interval(interval, template, expected):
    assert rules.render(template, rules.Settings(interval=interval)) == expected


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        pytest.param("", "by (job, node) on () ns=kube-system", id="none"),
        pytest.param("cluster", "by (cluster, job, node) on (cluster) ns=kube-system", id="set"),
    ],
)
def test_the_cluster_label_heads_every_list_or_is_not_there(cluster, expected):
    template = "by (${cluster,}job, node) on (${cluster}) ns=${namespace}"
    assert rules.render(template, rules.Settings(cluster=cluster)) == expected


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({"interval": "15"}, id="interval-without-unit"),
        pytest.param({"interval": "0s"}, id="interval-zero"),
        pytest.param({"interval": "100ms"}, id="interval-below-a-second"),
        pytest.param({"cluster": "k8s-cluster"}, id="label-not-a-label-name"),
        pytest.param({"cluster": "a) or vector(1"}, id="label-that-is-promql"),
        pytest.param({"namespace": "Kube_System"}, id="namespace-not-a-namespace"),
    ],
)
def test_settings_the_rules_cannot_hold_are_refused(settings):
    with pytest.raises(rules.SettingsError):
        rules.Settings(**settings)


def test_a_token_no_renderer_knows_is_refused_rather_than_left_in_the_rules():
    with pytest.raises(rules.SettingsError, match=r"\$\{window\}"):
        rules.render("max_over_time(x[${window}])", rules.Settings())


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        pytest.param({"kind": "MonitoringSettings", "spec": {}}, rules.Settings(), id="defaults"),
        pytest.param({"kind": "MonitoringSettings",
                      "spec": {"scrapeInterval": "60s", "clusterLabel": "cluster"}},
                     rules.Settings(interval="60s", cluster="cluster"), id="both-set"),
        pytest.param({"kind": "MonitoringSettings", "spec": {"clusterLabel": None}},
                     rules.Settings(), id="empty-label"),
    ],
)
def test_an_overlays_settings_are_read(doc, expected):
    assert rules.settings_of(doc) == expected


@pytest.mark.parametrize(
    "doc",
    [
        pytest.param(None, id="empty-file"),
        pytest.param({"kind": "ConfigMap", "spec": {}}, id="another-kind"),
        pytest.param({"kind": "MonitoringSettings", "spec": ["15s"]}, id="spec-not-a-mapping"),
        pytest.param({"kind": "MonitoringSettings", "spec": {"scrapeInterval": "soon"}},
                     id="bad-interval"),
    ],
)
def test_settings_that_are_not_an_overlays_are_refused(doc):
    with pytest.raises(rules.SettingsError):
        rules.settings_of(doc)


def test_an_overlays_rules_say_they_are_generated():
    text = rules.overlay("for: ${4i}\n", rules.Settings())
    assert text == rules.HEADER + "for: 1m\n" and "do not edit" in text
