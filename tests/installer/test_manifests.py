"""installer/*.yaml: valid against the Kubernetes schemas (offline), consistent with the CLI."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from cni_delguard.node.cli import build_parser

INSTALLER = Path(__file__).resolve().parents[2] / "installer"
MANIFESTS = sorted(INSTALLER.glob("*.yaml"))
# The oldest Kubernetes still commonly run, and the newest schema the package ships.
VERSIONS = ["1.28.0", kubernetes_validate.utils.latest_version()]
HOST_PATHS = {"/opt/cni/bin", "/etc/cni/net.d", "/var/lib/cni", "/var/log/cni-delguard"}


def load(path):
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert len(docs) == 1
    return docs[0]


def pod(path):
    return load(path)["spec"]["template"]["spec"]


def test_both_manifests_are_there():
    assert [p.name for p in MANIFESTS] == ["daemonset-watch.yaml", "daemonset.yaml"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest_is_valid_against_the_kubernetes_schema(path, version):
    kubernetes_validate.validate(load(path), version, strict=True)


def test_the_validator_does_reject_a_typo():
    bad = load(INSTALLER / "daemonset.yaml")
    bad["spec"]["template"]["spec"]["initContainers"][0]["resourcez"] = {}
    with pytest.raises(kubernetes_validate.ValidationError, match="resourcez"):
        kubernetes_validate.validate(bad, VERSIONS[-1], strict=True)


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_runs_on_every_node_without_the_pod_network(path):
    spec = pod(path)
    assert spec["hostNetwork"] is True
    assert {"operator": "Exists"} in spec["tolerations"]
    assert spec["priorityClassName"] == "system-node-critical"


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_container_has_requests_and_limits(path):
    spec = pod(path)
    for c in spec["initContainers"] + spec["containers"]:
        for kind in ("requests", "limits"):
            assert set(c["resources"][kind]) == {"cpu", "memory"}, c["name"]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_init_container_mounts_the_host_dirs_under_its_root(path):
    spec = pod(path)
    volumes = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    assert set(volumes.values()) == HOST_PATHS
    (init,) = spec["initContainers"]
    args = build_parser().parse_args(["install", *init["args"]])
    assert args.root == "/host"
    mounts = {m["mountPath"] for m in init["volumeMounts"]}
    assert mounts == {args.root + volumes[m["name"]] for m in init["volumeMounts"]}
    assert {args.root + p for p in HOST_PATHS} == mounts


def test_plain_manifest_ends_in_a_pause_container():
    (main,) = pod(INSTALLER / "daemonset.yaml")["containers"]
    assert main["image"].startswith("registry.k8s.io/pause:")


def test_watch_manifest_differs_only_in_its_sidecar():
    plain, watched = load(INSTALLER / "daemonset.yaml"), load(INSTALLER / "daemonset-watch.yaml")
    (sidecar,) = watched["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(["install", *sidecar["args"]])
    assert (args.watch, args.no_bundle, args.root) == (True, True, "/host")
    for doc in (plain, watched):
        del doc["spec"]["template"]["spec"]["containers"]
    assert plain == watched


def test_installer_image_is_one_and_the_same_everywhere():
    images = {c["image"] for path in MANIFESTS for c in pod(path)["initContainers"]}
    images |= {c["image"] for c in pod(INSTALLER / "daemonset-watch.yaml")["containers"]}
    assert images == {"localhost/cni-delguard:0.1.0"}
