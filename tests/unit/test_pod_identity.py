"""The pod's identity from CNI_ARGS (skel.pod_identity): what the runtime sends is kept, anything
Kubernetes would not accept as a namespace, pod name or UID is dropped, whatever else is in there.
Then where it goes: every marker (store) and every log line (Context.record); and the release
record beside the marker, which goes with it."""

from __future__ import annotations

import json
import os

import pytest

from cni_delguard.cni import skel
from cni_delguard.commands.context import Context
from cni_delguard.guard.log import Logger
from cni_delguard.state import store
from tests.support.paths import widened_dir

UID = "6f1c0a52-3b9e-4d1f-9a57-0c2b8e4d7a10"
# What containerd 1.6-2.x passes (pkg/cri/server/sandbox_run.go), in its order.
CONTAINERD = (
    f"IgnoreUnknown=1;K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=coredns-5d78c9869d-x7k2p;"
    f"K8S_POD_INFRA_CONTAINER_ID=0123abcd;K8S_POD_UID={UID}"
)
FULL = {"namespace": "kube-system", "name": "coredns-5d78c9869d-x7k2p", "uid": UID}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(CONTAINERD, FULL, id="containerd"),
        pytest.param("", {}, id="empty"),
        pytest.param("IgnoreUnknown=1", {}, id="no-pod-keys"),
        pytest.param("K8S_POD_NAMESPACE=default", {"namespace": "default"}, id="namespace-only"),
        pytest.param(
            "K8S_POD_UID=0123456789abcdef0123456789ABCDEF",
            {"uid": "0123456789abcdef0123456789ABCDEF"},
            id="static-pod-uid",
        ),
        pytest.param("K8S_POD_NAME=web.v1-2", {"name": "web.v1-2"}, id="subdomain-name"),
        pytest.param("K8S_POD_NAME=" + "a" * 253, {"name": "a" * 253}, id="name-253"),
        pytest.param("K8S_POD_NAMESPACE=" + "n" * 63, {"namespace": "n" * 63}, id="ns-63"),
        # hostile or broken values: each dropped, the rest kept
        pytest.param("K8S_POD_NAME=" + "a" * 254, {}, id="name-254"),
        pytest.param("K8S_POD_NAMESPACE=" + "n" * 64, {}, id="ns-64"),
        pytest.param("K8S_POD_NAMESPACE=../../etc;K8S_POD_NAME=web", {"name": "web"}, id="dotdot"),
        pytest.param("K8S_POD_NAMESPACE=a/b", {}, id="slash"),
        pytest.param("K8S_POD_NAMESPACE=my.ns", {}, id="dot-in-namespace"),
        pytest.param("K8S_POD_NAME=Web", {}, id="uppercase"),
        pytest.param("K8S_POD_NAME=-web", {}, id="leading-dash"),
        pytest.param("K8S_POD_NAME=web-", {}, id="trailing-dash"),
        pytest.param("K8S_POD_NAME=web..x", {}, id="empty-subdomain-part"),
        pytest.param("K8S_POD_NAME=.web", {}, id="leading-dot"),
        pytest.param("K8S_POD_NAME=web\x1b[31m", {}, id="escape-sequence"),
        pytest.param("K8S_POD_NAME=web\n{\"level\":\"error\"}", {}, id="newline-injection"),
        pytest.param("K8S_POD_NAME=wéb", {}, id="non-ascii"),
        pytest.param("K8S_POD_NAME=web\udcff", {}, id="surrogate-escape"),
        pytest.param("K8S_POD_NAME=web\x00x", {}, id="nul"),
        pytest.param("K8S_POD_NAME=", {}, id="empty-value"),
        pytest.param("K8S_POD_NAME", {}, id="no-equals"),
        pytest.param("K8S_POD_NAME=a=b", {}, id="second-equals"),
        pytest.param(" K8S_POD_NAME=web", {}, id="padded-key"),
        pytest.param("k8s_pod_name=web", {}, id="lowercase-key"),
        pytest.param("K8S_POD_NAME=web;K8S_POD_NAME=web2", {}, id="duplicate-key-dropped"),
        pytest.param("K8S_POD_NAME=web;K8S_POD_NAME=../x", {}, id="duplicate-hostile"),
        pytest.param("K8S_POD_UID=" + UID.upper(), {"uid": UID.upper()}, id="uid-upper-hex"),
        pytest.param("K8S_POD_UID=" + UID.replace("-", ""), {"uid": UID.replace("-", "")},
                     id="uid-32-hex"),
        pytest.param("K8S_POD_UID=" + UID[:-1], {}, id="uid-short"),
        pytest.param("K8S_POD_UID=" + UID[:-1] + "g", {}, id="uid-not-hex"),
        pytest.param("K8S_POD_UID=" + UID.replace("-", "/"), {}, id="uid-slashes"),
        pytest.param("K8S_POD_UID=" + UID[:8] + "x" + UID[9:], {}, id="uid-dash-misplaced"),
        pytest.param(";;;K8S_POD_NAME=web;;", {"name": "web"}, id="empty-pairs"),
        pytest.param("K8S_POD_NAME=web;" + "X=1;" * 20000, {}, id="over-64k"),
    ],
)
def test_pod_identity(args, expected):
    assert skel.pod_identity(args) == expected

WIDE = widened_dir()


def test_parse_env_keeps_cni_args_for_the_context():
    env = {"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "c1", "CNI_IFNAME": "eth0",
           "CNI_PATH": "/opt/cni/bin", "CNI_ARGS": CONTAINERD}
    assert skel.pod_identity(skel.parse_env(env).args) == FULL


def _context(args, log):
    inv = skel.Invocation("DEL", "c1", "", "eth0", "/opt/cni/bin", args)
    ctx = Context(inv, {})
    ctx.log = Logger(str(log), "info", WIDE)
    return ctx


def test_every_log_line_names_the_pod(tmp_path):
    log = tmp_path / "log"
    _context(CONTAINERD, log).record("info", "net1", decision="skip", reason="r")
    line = json.loads(log.read_text())
    assert (line["pod"], line["podUID"]) == ("kube-system/coredns-5d78c9869d-x7k2p", UID)
    assert line["decision"] == "skip"


@pytest.mark.parametrize(
    ("args", "pod", "uid"),
    [
        pytest.param("K8S_POD_NAME=web", None, None, id="name-without-namespace"),
        pytest.param(f"K8S_POD_NAMESPACE=a/b;K8S_POD_NAME=web;K8S_POD_UID={UID}", None, UID,
                     id="bad-namespace"),
        pytest.param("", None, None, id="no-cni-args"),
    ],
)
def test_log_line_without_a_whole_pod_has_no_pod(tmp_path, args, pod, uid):
    log = tmp_path / "log"
    _context(args, log).record("info", "net1", decision="skip", reason="r")
    line = json.loads(log.read_text())
    assert line.get("pod") == pod
    assert line.get("podUID") == uid


def test_marker_names_the_pod_and_release_record_goes_with_it(tmp_path):
    pod = skel.pod_identity(CONTAINERD)
    with store.MarkerStore(str(tmp_path), "net1", create=True, pod=pod) as markers:
        markers.write("c1:eth0", "completed", "c1", "eth0")
        assert markers.body("c1:eth0")["pod"] == FULL
        assert markers.release("c1:eth0") is None
        markers.put_release("c1:eth0", {"reason": "gone"})
        found = markers.release("c1:eth0")
        assert (found.fields, found.refused) == ({"reason": "gone"}, None)
        assert found.owner == os.geteuid()
        (tmp_path / "networks/net1/.c1:eth0.release.99.tmp").write_text("torn")
        markers.remove("c1:eth0")
    assert sorted(p.name for p in (tmp_path / "networks/net1").iterdir()) == []


def test_unparsable_release_record_still_releases(tmp_path):
    with store.MarkerStore(str(tmp_path), "net1", create=True) as markers:
        (tmp_path / "networks/net1/c1:eth0.release").write_bytes(b"\xff[[[")
        found = markers.release("c1:eth0")
        assert (found.fields, found.refused) == ({}, None)


def test_release_record_through_a_symlink_is_refused_not_read(tmp_path):
    (tmp_path / "elsewhere").write_text('{"reason": "planted"}')
    with store.MarkerStore(str(tmp_path), "net1", create=True) as markers:
        (tmp_path / "networks/net1/c1:eth0.release").symlink_to(tmp_path / "elsewhere")
        found = markers.release("c1:eth0")
        assert (found.fields, found.refused) == ({}, "c1:eth0.release: is a symlink")
        markers.put_release("c1:eth0", {"reason": "mine"})  # replaces the link, not its target
    assert (tmp_path / "elsewhere").read_text() == '{"reason": "planted"}'
    assert not (tmp_path / "networks/net1/c1:eth0.release").is_symlink()


def test_marker_without_a_pod_store_has_no_pod_key(tmp_path):
    with store.MarkerStore(str(tmp_path), "net1", create=True) as markers:
        markers.write("c1:eth0", "completed", "c1", "eth0")
        assert "pod" not in markers.body("c1:eth0")


def test_gc_prunes_release_records_with_their_attachments(tmp_path):
    from cni_delguard.guard import prune
    from tests.unit.conftest import make_settings

    with store.MarkerStore(str(tmp_path), "net1", create=True) as markers:
        for cid in ("keep", "drop"):
            markers.write(f"{cid}:eth0", "completed", cid, "eth0")
            markers.put_release(f"{cid}:eth0", {"reason": "r"})
        markers.put_release("orphan:eth0", {"reason": "r"})  # its marker went by hand
    valid = [{"containerID": "keep", "ifname": "eth0"}]
    pruned, skipped = prune.prune(make_settings(tmp_path), valid)
    assert (pruned, skipped) == (["drop:eth0", "orphan:eth0"], None)
    net = tmp_path / "networks/net1"
    assert sorted(p.name for p in net.iterdir()) == ["keep:eth0.json", "keep:eth0.release"]
