"""tools/build-chart.sh and what a `helm upgrade` between two chart versions does to the
DaemonSet, with a real helm (each `helm` row of peers/pins.tsv) and a real OCI registry.

How an upgrade rolls (README "Deploy"): the pod template holds nothing of the chart's own
version (no chart label, no checksum annotation), so a new chart version alone changes no pod,
and a new appVersion changes one field of it, the image. The DaemonSet's RollingUpdate (10% of
the nodes at a time, no surge) then replaces each pod: the old one stops without uninstalling
(cni.uninstall is off), the conf stays wrapped, and the new one copies its version beside the old
and switches the link (the installer's upgrade). The selector never changes (it is immutable).
No API server is built here, so the upgrade is checked as the rendered diff of two packages.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from cni_delguard import __version__
from tests.support import registry
from tests.support.helm import by_kind
from tests.support.objdiff import diff, key

from .test_chart import values_file

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "tools" / "build-chart.sh"
# (version, appVersion) of each package built; "current" is the project's.
PACKAGES = {
    "current": (__version__, __version__),
    "chart-only": (f"{__version__}-chart.1", __version__),
    "next": ("99.0.0", "99.0.0"),
}
HELM_ONLY = "helm.sh/chart"  # the label a chart-only release changes
# Values whose renders are compared across versions: the defaults, and every value at once.
COMPARED = ("watch", "monitoring", "openshift", "everything")


def build(helm, out: Path, version: str, app_version: str) -> Path:
    r = subprocess.run(
        [str(BUILD), "--version", version, "--app-version", app_version, "--out", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "HELM": str(helm.peer.bin("helm"))},
    )
    assert r.returncode == 0, r.stderr
    package = Path(r.stdout.strip())
    assert package == out / f"cni-delguard-{version}.tgz" and package.is_file()
    return package


@pytest.fixture(scope="module")
def packages(helm, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp(f"charts-{helm.version}")
    return {name: build(helm, out, *versions) for name, versions in PACKAGES.items()}


def indexed(docs: list[dict]) -> dict[str, dict]:
    return {key(d): d for d in docs}


def test_the_package_is_the_chart_at_the_projects_version(helm, packages):
    with tarfile.open(packages["current"]) as tar:
        names = set(tar.getnames())
        chart = yaml.safe_load(tar.extractfile("cni-delguard/Chart.yaml").read())
    assert (chart["version"], chart["appVersion"]) == (__version__, __version__)
    assert {"cni-delguard/values.schema.json", "cni-delguard/files/layouts.yaml",
            "cni-delguard/files/prometheusrule.yaml"} <= names
    assert not [n for n in names if n.startswith("cni-delguard/ci/")]  # .helmignore
    for values in COMPARED:
        from_dir = helm.render(values=values_file(values))
        from_package = helm.render(chart=packages["current"], values=values_file(values))
        assert diff(indexed(from_dir), indexed(from_package)) == []


@pytest.mark.parametrize("values", COMPARED)
def test_a_chart_only_release_changes_no_pod(helm, packages, values):
    """Same appVersion, new chart version: the only change anywhere is Helm's chart label on
    each object's metadata; the pod template is byte for byte the same, so no pod restarts."""
    old = helm.render(chart=packages["current"], values=values_file(values))
    new = helm.render(chart=packages["chart-only"], values=values_file(values))
    found = diff(indexed(old), indexed(new))
    assert found == [
        f".{key(d)}.metadata.labels.{HELM_ONLY}: 'cni-delguard-{__version__}' != "
        f"'cni-delguard-{PACKAGES['chart-only'][0]}'"
        for d in sorted(old, key=key)
    ]


@pytest.mark.parametrize("values", COMPARED)
def test_a_new_version_changes_only_the_image_in_the_pod_template(helm, packages, values):
    old = by_kind(helm.render(chart=packages["current"], values=values_file(values)))
    new = by_kind(helm.render(chart=packages["next"], values=values_file(values)))
    ds_old, ds_new = old["DaemonSet"], new["DaemonSet"]
    changed = diff(ds_old["spec"]["template"], ds_new["spec"]["template"])
    digest = yaml.safe_load(values_file(values).read_text()).get("image", {}).get("digest")
    if digest:  # pinned by digest: the operator says when the image changes, not the chart
        assert changed == []
    else:
        assert changed == [
            f".spec.containers[0].image: 'localhost/cni-delguard:{__version__}' != "
            "'localhost/cni-delguard:99.0.0'"
        ]
    assert ds_new["spec"]["selector"] == ds_old["spec"]["selector"]
    for kind in old:
        meta = diff(old[kind]["metadata"], new[kind]["metadata"])
        assert {m.split(":")[0] for m in meta} == {
            ".labels.helm.sh/chart", ".labels.app.kubernetes.io/version"}, meta
        assert diff({**old[kind], "metadata": {}}, {**new[kind], "metadata": {}}) == (
            [] if kind != "DaemonSet" else [f".spec.template{c}" for c in changed]
        )


def test_the_rollout_replaces_pods_without_surge_and_without_uninstalling(helm):
    """What the installer's upgrade expects of the rollout: a pod replaced in place (the new one
    installs its version beside the old and switches the link) while the old one leaves the
    conf wrapped when it stops."""
    ds = by_kind(helm.render())["DaemonSet"]
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate",
                                            "rollingUpdate": {"maxUnavailable": "10%"}}
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    assert c["args"][:2] == ["install", "--watch"] and "--uninstall-on-stop" not in c["args"]


def test_holding_is_an_upgrade_of_the_args_and_probe_only(helm):
    """`helm upgrade --reuse-values --set cni.hold=true` (README "Deploy"): the pods are
    replaced by ones that take the guard off and hold; nothing else in the pod changes but the
    liveness probe, gone (a holder watches nothing, so it writes no heartbeat)."""
    old = by_kind(helm.render(values=values_file("k3s")))["DaemonSet"]
    new = by_kind(helm.render("--set", "cni.hold=true", values=values_file("k3s")))["DaemonSet"]
    commands = []
    for ds in (old, new):
        (c,) = ds["spec"]["template"]["spec"]["containers"]
        commands.append((c.pop("args"), c["readinessProbe"]["exec"].pop("command")))
        c.pop("livenessProbe", None)
    assert "livenessProbe" in by_kind(helm.render(values=values_file("k3s")))["DaemonSet"][
        "spec"]["template"]["spec"]["containers"][0]
    assert diff(old, new) == []
    assert commands[1] == (
        ["uninstall", "--root", "/host", "--hold", "--layout", "k3s"],
        ["/usr/lib/cni-delguard/cni-delguard", "ready", "--root", "/host", "--uninstalled",
         "--layout", "k3s"],
    )


def test_the_chart_goes_through_an_oci_registry(helm, packages, tmp_path):
    """README "Deploy": `helm push` the package to an OCI registry, then install from there:
    what comes back renders the same objects as the chart in the repository."""
    exe = registry.binary()
    if exe is None:
        why = "no docker-registry: tools/unpack-deb.sh docker-registry usr/bin/docker-registry"
        if os.environ.get("CI"):
            pytest.fail(f"{why} (tools/test.sh runs it)")
        pytest.skip(why)
    with registry.running(exe, tmp_path / "registry") as address:
        where = f"oci://{address}/charts"
        r = helm.run("push", str(packages["current"]), where, "--plain-http")
        assert r.returncode == 0, r.stderr
        ref = f"{where}/cni-delguard"
        r = helm.run("show", "chart", ref, "--version", __version__, "--plain-http")
        assert r.returncode == 0, r.stderr
        assert yaml.safe_load(r.stdout)["appVersion"] == __version__
        for values in COMPARED:
            pulled = helm.render("--version", __version__, "--plain-http", chart=ref,
                                 values=values_file(values))
            assert diff(indexed(helm.render(values=values_file(values))), indexed(pulled)) == []
