"""A real cluster (issue 36): the chart and the kustomize overlays installed on a real API
server, a Deployment's pods deleted with kubectl, a node that reboots while pods are created,
each with and without the guard (scenarios.py, side by side: conftest.py).

A control run (without the guard) must show what BACKGROUND.md says the runtime does; when it
does not, the test says so with the kubelet's and containerd's own lines rather than bending.
"""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from tests.e2e_cluster.conftest import evidence
from tests.e2e_cluster.scenarios import RUNS, Evidence, Run
from tests.e2e_kubelet.kubelet import STORM_PERIODS

pytestmark = [pytest.mark.containerd, pytest.mark.slow]

# BACKGROUND.md "Which runtimes still deadlock": a pod deleted normally is stuck on every
# containerd; a sandbox whose ADD never completed is stuck on 1.6 only.
CONTROL = {
    ("double-del", "containerd-2.1"): "stuck",
    ("reboot", "containerd-1.6"): "stuck",
    ("reboot", "containerd-2.1"): "removed",
}
STALE_DEL = "server_socket is required in cni.conf"


def runs_of(scenario: str) -> list[Run]:
    return [r for r in RUNS if r.scenario == scenario]


def ids(spec: Run) -> str:
    return spec.id


def check_control(ev: Evidence) -> None:
    want = CONTROL[(ev.scenario, ev.runtime)]
    assert ev.outcome == want, (
        f"finding: without the guard, {ev.runtime} {ev.version} ended {ev.outcome!r} where "
        f"BACKGROUND.md says {want!r}; kubelet: {ev.kubelet}; containerd: {ev.containerd}")
    if want == "stuck":
        assert ev.kubelet and any(STALE_DEL in line for line in ev.kubelet), ev.kubelet


@pytest.mark.parametrize("spec", runs_of("double-del"), ids=ids)
def test_double_del(runs: dict[str, Future[Evidence]], spec: Run) -> None:
    """10 pods of a Deployment, `kubectl delete pod` of each: replaced and Ready either way;
    without the guard the old sandboxes stay (the second DEL fails), with it none is left."""
    ev = evidence(runs, spec)
    assert "replaced_ready" in ev.facts, ev
    if not spec.guard:
        check_control(ev)
        assert ev.gc_failures >= STORM_PERIODS, ev
        return
    assert ev.outcome == "removed" and ev.facts["left"] == 0, ev
    assert ev.gc_failures == 0, ev.kubelet


@pytest.mark.parametrize("spec", runs_of("reboot"), ids=ids)
def test_reboot(runs: dict[str, Future[Evidence]], spec: Run) -> None:
    """A power cut while a CSI plugin's DaemonSet pod and 10 pods that wait for it are being
    created: with the guard every pod is Ready again and no stale sandbox is left."""
    ev = evidence(runs, spec)
    assert ev.facts["stale_after_boot"] > 0, "the reboot left no stale sandbox to test with"
    if not spec.guard:
        check_control(ev)
        return
    assert ev.outcome == "removed", ev
    assert ev.facts["all_ready"] is not None and ev.facts["ready_pods"] == 11, ev.facts


@pytest.fixture(scope="module", params=runs_of("chart"), ids=lambda s: s.kubernetes)
def chart(request: pytest.FixtureRequest, runs: dict[str, Future[Evidence]]) -> Evidence:
    """The chart's run, once on each Kubernetes release that runs it: every chart test checks
    each."""
    spec: Run = request.param
    return evidence(runs, spec)


@pytest.mark.cluster_run("chart")
def test_release_verified_from_the_registry_and_tampering_refused(chart: Evidence) -> None:
    """Both releases pushed to the cluster's loopback registry by tools/release.sh --push; a
    user's checks pass on them (cosign verify of the image by digest, verify-attestation of its
    SLSA provenance, verify-blob of the chart helm pulled), and refuse a chart with one value
    changed and an image under the release's tag that the key never signed."""
    for version, steps in chart.facts["verified"].items():
        assert set(steps) == {"image", "provenance", "pull", "chart"}, version
        assert all(s["code"] == 0 for s in steps.values()), steps
    refused = chart.facts["refused"]
    assert refused["chart"]["code"] != 0, refused
    assert "invalid signature" in refused["chart"]["said"].lower(), refused
    assert refused["image"]["code"] != 0, refused
    assert "no signatures found" in refused["image"]["said"].lower() or \
        "no matching signatures" in refused["image"]["said"].lower(), refused


@pytest.mark.cluster_run("chart")
def test_dry_run_server(chart: Evidence) -> None:
    """`helm install --dry-run=server`: admitted by the API server, nothing created."""
    assert "DaemonSet" in chart.facts["dry_run_kinds"], chart.facts["dry_run_kinds"]
    assert chart.facts["dry_run_left_nothing"]


@pytest.mark.cluster_run("chart")
def test_pod_security_refusal(chart: Evidence) -> None:
    """Into a namespace that enforces baseline: refused before anything is created, and the
    message names the label to set; the same DaemonSet without the chart's check is created and
    its pods refused (what the user would otherwise meet)."""
    assert chart.facts["psa_code"] != 0
    said = chart.facts["psa_said"]
    assert "pod-security.kubernetes.io/enforce=privileged" in said, said
    assert chart.facts["psa_left"] == [], chart.facts["psa_left"]
    assert "violates PodSecurity" in chart.facts["psa_failed_create"], chart.facts


@pytest.mark.cluster_run("chart")
def test_install(chart: Evidence) -> None:
    """The DaemonSet rolls out, the conf is wrapped, `ready` in the pod says so, the metrics
    endpoint answers with the guard's series."""
    assert chart.facts["wrapped"]
    assert chart.facts["ready_exec"]["code"] == 0, chart.facts["ready_exec"]
    assert chart.facts["metrics_series"], "the metrics endpoint served no cni_delguard_ series"


@pytest.mark.cluster_run("chart")
def test_upgrade_under_load(chart: Evidence) -> None:
    """`helm upgrade` to the second release while pods come and go: no ADD or DEL failed, the
    conf was never seen unwrapped, the first version's bundle is kept beside the second."""
    up = chart.facts["upgrade"]
    assert up["cycles"] >= 6, up
    assert up["churn_failures"] == [] and up["runtime_cni_failures"] == 0, up
    assert up["samples"]["unwrapped"] == 0 and up["samples"]["wrapped"] > 0, up
    assert set(chart.facts["bundles_v1"]) < set(chart.facts["bundles_v2"]), chart.facts


@pytest.mark.cluster_run("chart")
def test_rollback_and_uninstall(chart: Evidence) -> None:
    """`helm rollback` switches back with the conf wrapped; the chart's uninstall mode (hold,
    then `helm uninstall`) restores the conf byte for byte and leaves nothing in the bin dir."""
    assert chart.facts["rollback_wrapped"]
    assert chart.facts["restored"], "the conf was not restored byte for byte"
    assert chart.facts["bin_left"] == [], chart.facts["bin_left"]


@pytest.mark.cluster_run("chart")
@pytest.mark.cluster_run("kustomize")
def test_kustomize_behaves_as_the_chart(runs: dict[str, Future[Evidence]]) -> None:
    """`kubectl apply -k` of the watch and monitoring overlays: the same rollout, wrap,
    readiness and metrics as the chart; the guard's entry in the conf and the pod template the
    API server stored are the same (the chart's on the same Kubernetes release: another
    release's API server may default other fields)."""
    (spec,) = runs_of("kustomize")
    ev = evidence(runs, spec)
    (same,) = [r for r in runs_of("chart") if r.kubernetes == spec.kubernetes]
    chart = evidence(runs, same)
    assert ev.facts["wrapped"] and ev.facts["ready_exec"]["code"] == 0, ev.facts
    assert ev.facts["metrics_series"] == chart.facts["metrics_series"]
    assert ev.facts["guard_entry"] == chart.facts["guard_entry"]
    assert ev.facts["template"] == chart.facts["template"]
    assert ev.facts["restored"]


@pytest.mark.cluster_run("multus-thick")
def test_multus_thick_on_the_real_api(runs: dict[str, Future[Evidence]]) -> None:
    """multus thick's daemon against the real API server: it finds the pod and its
    NetworkAttachmentDefinition, writes the network-status back, and the pod's sandbox is
    removed after `kubectl delete pod`; with the guard in front, the daemon is asked for fewer
    DELs (the guard answers the second, after the first succeeded)."""
    (spec,) = runs_of("multus-thick")
    ev = evidence(runs, spec)
    for phase in ("without", "with"):
        seen = ev.facts[phase]
        assert seen["networks"][-1:] == ["apps/extra"], seen
        assert seen["removed"] and seen["daemon_adds"] == 1, seen
    assert ev.facts["with"]["daemon_dels"] < ev.facts["without"]["daemon_dels"], ev.facts


@pytest.mark.cluster_run("observe")
def test_what_a_user_sees_in_observe_mode(runs: dict[str, Future[Evidence]]) -> None:
    """A healthy node, the chart in observe mode: the conf says observe, the installer's log,
    `doctor` and `stats` run in the pod answer (docs/install.md and docs/cli.md quote them),
    and the pods deleted with kubectl are removed."""
    (spec,) = runs_of("observe")
    ev = evidence(runs, spec)
    assert ev.facts["mode"] == "observe", ev.facts
    assert ev.outcome == "removed"
    assert ev.facts["logs"], "the installer's pod logged nothing"
    for command in ("doctor", "stats", "assess"):
        assert ev.facts[command]["code"] == 0 and ev.facts[command]["stdout"], ev.facts[command]
    # assess in the pod, given the runtime as the kubelet reports it, finds the matrix's cell
    assess = "\n".join(ev.facts["assess"]["stdout"])
    assert ev.facts["runtime_reported"].startswith("containerd://"), ev.facts["runtime_reported"]
    assert "2.1.6" in assess and "bridge (not multus)" in assess, assess
    assert "runtime was not found" not in assess, assess
