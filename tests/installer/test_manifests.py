"""installer/: the DaemonSet and its kustomize overlays, valid against the Kubernetes schemas
(offline) and consistent with the CLI.

The overlays are rendered with `kubectl kustomize` from Debian's kubectl (trixie), which
tools/install-kubectl.sh unpacks under .cache/ (tools/test.sh runs it; KUBECTL overrides).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from cni_delguard.cli import build_parser
from cni_delguard.node import errors, layouts
from tests.support.kustomize import KUSTOMIZE, render, render_all

REPO = Path(__file__).resolve().parents[2]
INSTALLER = REPO / "installer"
OVERLAYS = sorted(p.name for p in (KUSTOMIZE / "overlays").iterdir())
MANIFESTS = sorted(INSTALLER.glob("*.yaml")) + sorted(KUSTOMIZE.rglob("daemonset.yaml"))
# The oldest Kubernetes still commonly run, and the newest schema the package ships.
VERSIONS = ["1.28.0", kubernetes_validate.utils.latest_version()]
# Written by the installer (the log's dir is read: the watcher reads the guard's log).
HOST_PATHS = {"/opt/cni/bin", "/etc/cni/net.d", "/var/lib/cni/delguard", "/var/log/cni-delguard"}
# Read-only: the runtime's config, where it really looks for the conf and plugins.
RUNTIME_CONF = {"/etc/containerd", "/etc/crio"}
# Read-only: the kubelet's config file alone, for its deadlines (node/kubeletconf.py).
KUBELET_CONF = {"/var/lib/kubelet/config.yaml"}
ENTRY = "/usr/lib/cni-delguard/cni-delguard"


def load(path: Path) -> dict:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert len(docs) == 1
    return docs[0]


def pod(doc: dict) -> dict:
    return doc["spec"]["template"]["spec"]


def cli_args(container: dict):
    """The container's arguments as the image's entrypoint (the binary) parses them."""
    return build_parser(sys.stdout, sys.stderr).parse_args(container["args"])


def test_the_plain_manifest_is_the_base():
    assert (INSTALLER / "daemonset.yaml").resolve() == KUSTOMIZE / "base" / "daemonset.yaml"
    jobs = {"monitoring", "selinux", "uninstall", "uninstall-monitoring", "uninstall-on-delete",
            "watch"}
    assert set(OVERLAYS) == jobs | set(layouts.BY_NAME)  # and one overlay per layout


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(INSTALLER)))
def test_manifest_is_valid_against_the_kubernetes_schema(path, version):
    kubernetes_validate.validate(load(path), version, strict=True)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_overlay_is_valid_against_the_kubernetes_schema(overlay, version):
    kubernetes_validate.validate(render(overlay), version, strict=True)


def test_the_validator_does_reject_a_typo():
    bad = load(INSTALLER / "daemonset.yaml")
    pod(bad)["containers"][0]["resourcez"] = {}
    with pytest.raises(kubernetes_validate.ValidationError, match="resourcez"):
        kubernetes_validate.validate(bad, VERSIONS[-1], strict=True)


def test_the_default_overlay_is_the_plain_manifest():
    assert render("watch") == load(INSTALLER / "daemonset.yaml")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_runs_on_every_node_without_the_pod_network_or_the_api(overlay):
    doc = render(overlay)
    spec = pod(doc)
    assert spec["hostNetwork"] is True
    assert {"operator": "Exists"} in spec["tolerations"]
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["automountServiceAccountToken"] is False  # RBAC-free
    # OpenShift's SCC is granted to a service account (test_the_openshift_scc_...): no token
    assert spec.get("serviceAccountName") == ("cni-delguard" if overlay == "openshift" else None)
    (c,) = spec["containers"]
    assert "initContainers" not in spec
    for kind in ("requests", "limits"):
        assert set(c["resources"][kind]) == {"cpu", "memory"}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert doc["metadata"]["name"] == "cni-delguard"  # every overlay replaces the same DaemonSet


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_node_labelled_excluded_gets_no_pod(overlay):
    """CniDelguardPluginBroken's remedy: `kubectl label node NODE cni-delguard/excluded=true`
    keeps every overlay's pod off that node (the DaemonSet controller removes one that runs
    there), so the next container start cannot wrap it again; any other value does not."""
    affinity = pod(render(overlay))["affinity"]["nodeAffinity"]
    (term,) = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (expr,) = term["matchExpressions"]
    assert expr == {"key": "cni-delguard/excluded", "operator": "NotIn", "values": ["true"]}


def test_the_default_watches_and_its_probe_is_the_ready_command():
    (c,) = pod(load(INSTALLER / "daemonset.yaml"))["containers"]
    args = cli_args(c)
    assert (args.command, args.watch, args.root, args.no_bundle) == (
        "install",
        True,
        "/host",
        False,
    )
    assert not args.uninstall_on_stop  # off by default: an upgrade must not unguard the node
    probe = c["readinessProbe"]["exec"]["command"]
    assert probe[0] == ENTRY
    probe_args = build_parser(sys.stdout, sys.stderr).parse_args(probe[1:])
    assert (probe_args.command, probe_args.root, probe_args.uninstalled) == (
        "ready",
        "/host",
        False,
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_watcher_has_a_liveness_probe_on_its_own_heartbeat_a_holder_none(overlay):
    """The watcher writes its heartbeat into the pod's own emptyDir (never the host's), and the
    liveness probe reads that file; `uninstall --hold` watches nothing and has no probe."""
    spec = pod(render(overlay))
    (c,) = spec["containers"]
    args = cli_args(c)
    if args.command != "install":
        assert "livenessProbe" not in c
        return
    probe = build_parser(sys.stdout, sys.stderr).parse_args(
        c["livenessProbe"]["exec"]["command"][1:])
    assert (probe.command, probe.live_file) == ("live", args.live_file)
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    (run,) = [v for v in spec["volumes"] if v["name"] == "run"]
    assert "emptyDir" in run and os.path.dirname(args.live_file) == mounts["run"]
    assert not mounts["run"].startswith(args.root + "/")


def test_the_uninstall_overlay_uninstalls_holds_and_is_ready_when_the_guard_is_off():
    (c,) = pod(render("uninstall"))["containers"]
    args = cli_args(c)
    assert (args.command, args.hold, args.root) == ("uninstall", True, "/host")
    probe = build_parser(sys.stdout, sys.stderr).parse_args(
        c["readinessProbe"]["exec"]["command"][1:]
    )
    assert (probe.command, probe.uninstalled) == ("ready", True)


def test_the_monitoring_uninstall_holds_as_the_uninstall_does_and_takes_the_monitoring_along():
    """A planned uninstall of a monitored deployment pages nobody: applied, its rules are empty
    (and its pods serve no metrics); deleted, it deletes the PrometheusRule, the PodMonitor and
    the dashboard with the DaemonSet, which `kubectl apply -k overlays/uninstall` never would."""
    from .test_monitoring import round_trip

    found = {d["kind"]: d for d in render_all("uninstall-monitoring")}
    monitored = {d["kind"]: d for d in render_all("monitoring")}
    assert found["DaemonSet"] == render("uninstall")
    assert set(found) == set(monitored)
    for kind in set(found) - {"DaemonSet"}:
        assert found[kind]["metadata"]["name"] == monitored[kind]["metadata"]["name"], kind
        assert found[kind]["metadata"]["namespace"] == monitored[kind]["metadata"]["namespace"]
    assert found["PrometheusRule"]["spec"] == {"groups": []}
    assert round_trip(found["PrometheusRule"]) == found["PrometheusRule"]


def test_the_uninstall_on_delete_overlay_only_adds_the_flag():
    (c,) = pod(render("uninstall-on-delete"))["containers"]
    assert cli_args(c).uninstall_on_stop
    assert c["args"][:-1] == pod(render("watch"))["containers"][0]["args"]


def test_the_selinux_overlay_sets_spc_t():
    (c,) = pod(render("selinux"))["containers"]
    assert c["securityContext"]["seLinuxOptions"] == {"type": "spc_t"}


@pytest.mark.parametrize("layout", ["k3s", "rke2", "microk8s", "talos"])
def test_the_selinux_component_goes_with_any_layouts_overlay(layout, tmp_path):
    """A layout's overlay plus components/selinux (an overlay of the user's own): spc_t, and the
    layout's paths and args untouched."""
    overlay = tmp_path / f"{layout}-selinux"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {os.path.relpath(KUSTOMIZE / 'overlays' / layout, overlay)}\n"
        f"components:\n  - {os.path.relpath(KUSTOMIZE / 'components' / 'selinux', overlay)}\n")
    (c,) = pod(render(str(overlay)))["containers"]
    assert c["securityContext"]["seLinuxOptions"] == {"type": "spc_t"}
    (plain,) = pod(render(layout))["containers"]
    del c["securityContext"]["seLinuxOptions"]
    assert c == plain


def test_the_container_mounts_every_host_dir_under_its_root():
    spec = pod(load(INSTALLER / "daemonset.yaml"))
    volumes = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert set(volumes.values()) == HOST_PATHS | RUNTIME_CONF | KUBELET_CONF
    (c,) = spec["containers"]
    root = cli_args(c).root
    mounts = {m["mountPath"]: m for m in c["volumeMounts"] if m["name"] in volumes}
    assert set(mounts) == {os.path.normpath(root + volumes[m["name"]]) for m in mounts.values()}
    assert {root + p for p in HOST_PATHS | RUNTIME_CONF | KUBELET_CONF} == set(mounts)
    read_only = RUNTIME_CONF | KUBELET_CONF | {"/var/log/cni-delguard"}
    assert all(mounts[root + p].get("readOnly") is True for p in read_only)
    assert all(not mounts[root + p].get("readOnly") for p in HOST_PATHS - read_only)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_overlay_mounts_the_hosts_root_or_a_parent_of_what_it_writes(overlay):
    """Issue 38, items 3 and 7: only the dirs the installer and the probe need are mounted,
    never the host's / (on 20ffe12: / read-only at /host, beside hostNetwork and root), nor
    /var/lib/cni (IPAM leases, libcni's cache), k3s's data/ or /var/snap/microk8s."""
    spec = pod(render(overlay))
    paths = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    wide = {"/", "/var", "/var/lib", "/var/lib/cni", "/etc", "/var/lib/rancher/k3s/data",
            "/var/snap/microk8s", "/var/snap/microk8s/current", "/proc", "/run"}
    assert not paths & wide, paths & wide
    (c,) = spec["containers"]
    root = cli_args(c).root
    assert root not in {m["mountPath"] for m in c["volumeMounts"]}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_runs_under_the_runtimes_default_seccomp_filter(overlay):
    """Issue 38, item 8: seccompProfile RuntimeDefault (none on 20ffe12: Unconfined, the
    kubelet's default); measured on containerd 1.6.20 and 2.1.6 by tests/e2e_kubelet."""
    (c,) = pod(render(overlay))["containers"]
    assert c["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_the_container_may_chroot_into_the_host_to_run_the_plugin_there():
    (c,) = pod(load(INSTALLER / "daemonset.yaml"))["containers"]
    assert "SYS_CHROOT" in c["securityContext"]["capabilities"]["add"]


def test_the_exit_codes_are_all_distinct():
    classes = [
        errors.InstallerError,
        errors.ConfRefusedError,
        errors.NoConfError,
        errors.BundleRefusedError,
        errors.LockTimeoutError,
        errors.WrapUnknownError,
    ]
    codes = [c.code for c in classes]
    assert len(set(codes)) == len(codes) and 2 not in codes  # 2 is usage


def volumes_of(doc: dict) -> dict[str, tuple[str, str]]:
    """volume name -> (its host path, where the container mounts it)."""
    spec = pod(doc)
    (c,) = spec["containers"]
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    return {v["name"]: (v["hostPath"]["path"], mounts[v["name"]]["mountPath"])
            for v in spec["volumes"] if "hostPath" in v}


@pytest.mark.parametrize("layout", layouts.LAYOUTS, ids=lambda layout: layout.name)
def test_each_layouts_overlay_mounts_the_layouts_paths_and_names_it(layout):
    """One source of truth: the overlay's hostPaths are the layout table's row (its writable
    mounts and its runtime's config, read-only), each mounted at the same path under the root
    the installer is given; SYS_CHROOT stays; installer and probe both get `--layout NAME`."""
    doc = render(layout.name)
    (c,) = pod(doc)["containers"]
    args = cli_args(c)
    probe_argv = c["readinessProbe"]["exec"]["command"][1:]
    probe = build_parser(sys.stdout, sys.stderr).parse_args(probe_argv)
    assert (args.command, args.watch, args.layout) == ("install", True, layout.name)
    assert (probe.command, probe.layout, probe.root) == ("ready", layout.name, args.root)
    found = volumes_of(doc)
    expected = {name: (path, os.path.normpath(args.root + path))
                for name, path in layout.mounts().items()}
    expected |= {name: (path, os.path.normpath(args.root + path))
                 for name, (path, _) in layout.read_only_mounts().items()}
    assert found == expected
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert all(mounts[name].get("readOnly") is True for name in layout.read_only_mounts())
    types = {v["name"]: v["hostPath"]["type"] for v in pod(doc)["volumes"] if "hostPath" in v}
    assert all(types[name] == kind for name, (_, kind) in layout.read_only_mounts().items())
    assert "SYS_CHROOT" in c["securityContext"]["capabilities"]["add"]
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_the_default_overlay_finds_the_layout_and_mounts_the_standard_paths():
    (c,) = pod(render("watch"))["containers"]
    assert cli_args(c).layout == "auto"
    found = volumes_of(render("watch"))
    assert {name: found[name][0] for name in layouts.STANDARD.mounts()} == (
        layouts.STANDARD.mounts()
    )


def test_only_k3s_data_dir_is_never_created_on_a_node():
    """hostPath DirectoryOrCreate would make k3s's data/cni (or MicroK8s's bin dir) on a node
    that has none; those overlays mount it only when it is there."""
    for layout in layouts.LAYOUTS:
        types = {v["name"]: v["hostPath"]["type"] for v in pod(render(layout.name))["volumes"]
                 if "hostPath" in v}
        assert types["cni-bin"] == ("Directory" if layout.bin_mount else "DirectoryOrCreate")


def test_the_openshift_scc_allows_exactly_what_its_pod_asks_for():
    docs = {d["kind"]: d for d in render_all("openshift")}
    scc, account, ds = docs["SecurityContextConstraints"], docs["ServiceAccount"], docs["DaemonSet"]
    spec = pod(ds)
    (c,) = spec["containers"]
    user = f"system:serviceaccount:{account['metadata']['namespace']}:{account['metadata']['name']}"
    assert scc["users"] == [user]
    assert account["metadata"]["namespace"] == ds["metadata"]["namespace"]
    assert spec["serviceAccountName"] == account["metadata"]["name"]
    assert account["automountServiceAccountToken"] is False
    assert spec["automountServiceAccountToken"] is False
    assert set(c["securityContext"]["capabilities"]["add"]) == set(scc["allowedCapabilities"])
    assert scc["allowPrivilegedContainer"] is False and scc["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert "privileged" not in c["securityContext"]
    assert scc["allowHostNetwork"] is True and spec["hostNetwork"] is True
    assert scc["allowHostDirVolumePlugin"] is True and scc["volumes"] == ["hostPath", "emptyDir"]
    assert set(scc["volumes"]) == {k for v in spec["volumes"] for k in v if k != "name"}
    assert scc["runAsUser"] == {"type": "RunAsAny"} and c["securityContext"]["runAsUser"] == 0
    assert c["securityContext"]["seLinuxOptions"] == {"type": "spc_t"}
    assert scc["seccompProfiles"] == ["runtime/default"]
    kubernetes_validate.validate(account, VERSIONS[-1], strict=True)
