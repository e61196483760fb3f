"""`cni-delguard release` and the DEL it lets through, run as processes (the package and the
frozen binary): a completed ADD whose delegate can never delete it (tests/fakes/
undeletable_delegate.py: multus v4.3.0 stripping kube-ovn's server_socket on every DEL) stays
strict until an operator releases it, and only what the operator named is released."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import time
from pathlib import Path

import pytest

from cni_delguard.ops import stuck
from tests.support import guard
from tests.support.fakes import install_fake
from tests.support.nodestate import libcni_result

STALE_DEL = "server_socket is required in cni.conf"
UID = "6f1c0a52-3b9e-4d1f-9a57-0c2b8e4d7a10"
PODS = {
    "web": ("default", "web", UID),
    "other": ("default", "other", "0e8a7f44-5c1d-4a39-8b1e-2f6d9c3b5a77"),
    "twin": ("kube-system", "web", "a3d5c7e9-1b2f-4c6d-8e0a-9f7b5d3c1e24"),
}


@pytest.fixture(params=["package", "frozen"])
def node(request, tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DELGUARD_UNDER_TEST", request.param)
    if request.param == "frozen" and not os.access(guard.FROZEN, os.X_OK):
        if os.environ.get("CI"):
            pytest.fail("the frozen binary must be built before the tests (tools/build.sh)")
        pytest.skip("frozen binary not built (tools/build.sh)")
    (tmp_path / "bin").mkdir()
    guard.install_guard(tmp_path / "bin")
    install_fake(tmp_path / "bin", "undeletable", "undeletable_delegate.py")
    return tmp_path


def conf(node: Path, network: str = "net1", **delegate: object) -> dict[str, object]:
    return {
        "cniVersion": "1.0.0",
        "name": network,
        "type": "cni-delguard",
        "delegate": {"type": "undeletable", "recordFile": str(node / "calls"), **delegate},
        "stateDir": str(node / "state"),
        "logFile": str(node / "log"),
        "resultCacheDirs": [str(node / "results")],
        "multusCacheDirs": [],
    }


def cni(node, command, pod="web", cid="c1", ifname="eth0", network="net1", args=None, **knobs):
    ns, name, uid = PODS[pod]
    if args is None:
        args = (
            f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={name};"
            f"K8S_POD_INFRA_CONTAINER_ID={cid};K8S_POD_UID={uid}"
        )
    return guard.exec_cni(
        node / "bin", command, conf(node, network, **knobs), cid, ifname, cni_args=args
    )


def release(node: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return guard.tool(node / "bin", "release", "--state-dir", str(node / "state"), *argv)


def calls(node: Path, cid: str | None = None) -> list[str]:
    path = node / "calls"
    entries = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    return [e["command"] for e in entries if cid is None or e["containerID"] == cid]


def log_lines(node: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in (node / "log").read_text().splitlines()]


def state_files(node: Path) -> dict[str, list[str]]:
    root = node / "state" / "networks"
    return {n.name: sorted(os.listdir(n)) for n in sorted(root.iterdir())} if root.exists() else {}


def test_released_attachment_del_succeeds_after_failing_strictly(node):
    assert cni(node, "ADD")[0] == 0
    marker = json.loads((node / "state/networks/net1/c1:eth0.json").read_text())
    assert marker["state"] == "completed"
    assert marker["pod"] == {"namespace": "default", "name": "web", "uid": UID}

    code, out = cni(node, "DEL")
    assert (code, out["code"], out["msg"]) == (1, 7, STALE_DEL)
    failed = log_lines(node)[-1]
    assert failed["decision"] == "forward-strict"
    assert (failed["pod"], failed["podUID"]) == ("default/web", UID)
    assert state_files(node) == {"net1": ["c1:eth0.json", "c1:eth0.lock"]}

    done = release(node, "--pod", "default/web", "--reason", "kube-ovn removed from this node")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "released network net1 container c1 ifname eth0 pod default/web (marker completed)"
    ]
    record_path = node / "state/networks/net1/c1:eth0.release"
    assert stat.S_IMODE(record_path.lstat().st_mode) == 0o600
    record = json.loads(record_path.read_text())
    assert (record["reason"], record["uid"]) == ("kube-ovn removed from this node", os.getuid())

    assert cni(node, "DEL") == (0, None)
    assert calls(node) == ["ADD", "DEL", "DEL"]  # the delegate got both DELs
    line = log_lines(node)[-1]
    assert line["decision"] == "released"
    assert line["level"] == "warning"
    assert line["release"]["reason"] == "kube-ovn removed from this node"
    assert "kube-ovn removed from this node" in line["reason"]
    assert line["delegateError"] == {"code": 7, "msg": STALE_DEL}
    assert (line["pod"], line["podUID"]) == ("default/web", UID)
    assert state_files(node) == {"net1": []}  # marker, release record and lock are gone

    assert cni(node, "DEL") == (0, None)  # a repeated DEL: no evidence left
    assert log_lines(node)[-1]["decision"] == "skip"
    assert calls(node) == ["ADD", "DEL", "DEL"]


def test_an_add_from_before_the_install_is_adopted_and_can_be_released(node):
    """No marker of the guard's: only libcni's cache says the ADD completed (the pod was
    created before the guard was installed). Its failing strict DEL leaves a `completed` marker
    naming that evidence, so that the command doctor prints for it (stuck.release_command)
    frees it; before, `release` found nothing to release and exited 2."""
    cache = libcni_result(node / "results", "net1", "c1")
    code, out = cni(node, "DEL")
    assert (code, out["code"], out["msg"]) == (1, 7, STALE_DEL)  # strict: the error comes back
    marker = json.loads((node / "state/networks/net1/c1:eth0.json").read_text())
    assert (marker["state"], marker["adopted"]) == ("completed", ["libcni-cache"])
    assert marker["pod"] == {"namespace": "default", "name": "web", "uid": UID}

    code, out = cni(node, "DEL")  # strict again: adopting it changed no decision
    assert (code, out["msg"]) == (1, STALE_DEL)
    assert [x["decision"] for x in log_lines(node)] == ["forward-strict", "forward-strict"]

    done = release(node, "--pod", "default/web", "--reason", "created before the guard")
    assert done.returncode == 0, done.stderr
    assert cni(node, "DEL") == (0, None)
    assert log_lines(node)[-1]["decision"] == "released"
    assert calls(node) == ["DEL", "DEL", "DEL"]  # the delegate got every DEL
    assert state_files(node) == {"net1": []}
    assert cache.exists()  # libcni's own file is libcni's to remove


def test_release_of_a_delegate_that_never_answers(node):
    assert cni(node, "ADD")[0] == 0
    assert release(node, "--container", "c1").returncode == 0
    knobs = {"hangDel": True}
    data = conf(node, **knobs)
    data["timeouts"] = {"del": 1}
    (node / "hang.json").write_text(json.dumps(data))
    env = {
        "PATH": "/usr/bin:/bin",
        "CNI_COMMAND": "DEL",
        "CNI_CONTAINERID": "c1",
        "CNI_IFNAME": "eth0",
        "CNI_PATH": str(node / "bin"),
    }
    proc = subprocess.run(
        [str(node / "bin" / "cni-delguard")],
        input=json.dumps(data).encode(),
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (0, b"")
    line = log_lines(node)[-1]
    assert line["decision"] == "released"
    assert line["release"]["reason"] == "no reason given"
    assert line["delegateError"]["code"] == 11  # the guard's timeout
    assert "pod" not in line  # this DEL came without CNI_ARGS
    assert state_files(node) == {"net1": []}


def _add_fleet(node: Path) -> None:
    """Pod default/web with two attachments (two networks), and two pods that look alike."""
    assert cni(node, "ADD", cid="c1", ifname="eth0", network="net1")[0] == 0
    assert cni(node, "ADD", cid="c1", ifname="net1", network="net2")[0] == 0
    assert cni(node, "ADD", pod="other", cid="c2", ifname="eth0", network="net1")[0] == 0
    assert cni(node, "ADD", pod="twin", cid="c3", ifname="eth0", network="net1")[0] == 0


def test_release_pod_releases_its_attachments_and_nothing_else(node):
    _add_fleet(node)
    done = release(node, "--pod", "default/web", "--reason", "daemon gone")
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == [
        "released network net1 container c1 ifname eth0 pod default/web (marker completed)",
        "released network net2 container c1 ifname net1 pod default/web (marker completed)",
    ]
    released = {
        net: [f for f in files if f.endswith(".release")]
        for net, files in state_files(node).items()
    }
    assert released == {"net1": ["c1:eth0.release"], "net2": ["c1:net1.release"]}

    for pod, cid in (("other", "c2"), ("twin", "c3")):
        code, out = cni(node, "DEL", pod=pod, cid=cid)
        assert (code, out["msg"]) == (1, STALE_DEL), f"{pod} was released"
    assert cni(node, "DEL", cid="c1", ifname="eth0", network="net1") == (0, None)
    assert cni(node, "DEL", cid="c1", ifname="net1", network="net2") == (0, None)
    assert [x["decision"] for x in log_lines(node)[-4:]] == [
        "forward-strict", "forward-strict", "released", "released"
    ]
    assert state_files(node) == {
        "net1": ["c2:eth0.json", "c2:eth0.lock", "c3:eth0.json", "c3:eth0.lock"],
        "net2": [],
    }


def test_release_container_narrowed_to_one_network(node):
    _add_fleet(node)
    done = release(node, "--container", "c1", "--network", "net2", "--ifname", "net1")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1
    assert sorted(p.name for p in (node / "state").rglob("*.release")) == ["c1:net1.release"]


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--pod", "default/nope"], id="unknown-pod"),
        pytest.param(["--pod", "kube-public/web"], id="other-namespace"),
        pytest.param(["--container", "c9"], id="unknown-container"),
        pytest.param(["--container", "c1", "--ifname", "eth9"], id="unknown-ifname"),
        pytest.param(["--pod", "default/web", "--network", "net9"], id="unknown-network"),
    ],
)
def test_no_match_exits_2_and_changes_nothing(node, argv):
    _add_fleet(node)
    before = state_files(node)
    done = release(node, *argv)
    assert done.returncode == 2
    assert "nothing released" in done.stderr
    assert done.stdout == ""
    assert state_files(node) == before


def test_no_state_dir_at_all_is_no_match(node):
    done = release(node, "--pod", "default/web")
    assert done.returncode == 2
    assert "nothing released" in done.stderr
    assert not (node / "state").exists()


def test_dry_run_shows_and_changes_nothing(node):
    _add_fleet(node)
    before = state_files(node)
    done = release(node, "--pod", "default/web", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == [
        "dry run: nothing written",
        "would release network net1 container c1 ifname eth0 pod default/web (marker completed)",
        "would release network net2 container c1 ifname net1 pod default/web (marker completed)",
    ]
    assert state_files(node) == before
    code, out = cni(node, "DEL")
    assert (code, out["msg"]) == (1, STALE_DEL)


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--pod", "../etc/passwd"], id="pod-traversal"),
        pytest.param(["--pod", "default"], id="pod-without-name"),
        pytest.param(["--pod", "Default/web"], id="pod-uppercase"),
        pytest.param(["--container", "../../etc"], id="container-traversal"),
        pytest.param(["--container", "c1", "--ifname", "a/b"], id="ifname-slash"),
        pytest.param(["--container", "c1", "--network", "../net1"], id="network-traversal"),
        pytest.param(["--container", "c1", "--reason", "two\nlines"], id="reason-newline"),
        pytest.param(["--container", "c1", "--reason", "\x1b[31mred"], id="reason-escape"),
        pytest.param(["--container", "c1", "--pod", "default/web"], id="both-targets"),
        pytest.param(["--ifname", "eth0"], id="no-target"),
    ],
)
def test_bad_arguments_are_usage_errors(node, argv):
    _add_fleet(node)
    before = state_files(node)
    done = release(node, *argv)
    assert done.returncode == 2
    assert "cni-delguard: error: " in done.stderr and "Traceback" not in done.stderr
    assert state_files(node) == before


def test_hostile_cni_args_never_reach_marker_or_log(node):
    hostile = (
        "K8S_POD_NAMESPACE=../../etc;K8S_POD_NAME=web\x1b[31m;"
        "K8S_POD_UID=6f1c0a52-3b9e-4d1f-9a57-0c2b8e4d7a1/"
    )
    assert cni(node, "ADD", args=hostile)[0] == 0
    marker = json.loads((node / "state/networks/net1/c1:eth0.json").read_text())
    assert marker["pod"] == {}
    line = log_lines(node)[-1]
    assert line["decision"] == "add-completed"
    assert "pod" not in line and "podUID" not in line
    assert "\x1b" not in (node / "log").read_text() and "etc" not in (node / "log").read_text()
    assert release(node, "--pod", "default/web").returncode == 2


def test_stuck_finds_it_in_the_real_log_and_its_command_releases_it(node):
    """ops/stuck.py (for doctor) on the log this very guard wrote, and the command it gives."""
    assert cni(node, "ADD")[0] == 0
    assert cni(node, "DEL")[0] == 1
    assert cni(node, "DEL")[0] == 1
    later = time.time() + 3600  # judged an hour later: no waiting in the test
    [found] = stuck.find_stuck(log_lines(node), later, state_dir=str(node / "state"))
    assert (found.container_id, found.ifname, found.network) == ("c1", "eth0", "net1")
    assert (found.pod, found.pod_uid, found.failures) == ("default/web", UID, 2)
    assert found.last_error == {"code": 7, "msg": STALE_DEL}
    argv = shlex.split(found.command)
    assert argv[:2] == ["cni-delguard", "release"]
    proc = subprocess.run(
        [str(node / "bin" / "cni-delguard"), *argv[1:]],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert cni(node, "DEL") == (0, None)
    assert log_lines(node)[-1]["decision"] == "released"
    assert stuck.find_stuck(log_lines(node), later, state_dir=str(node / "state")) == []


def test_a_new_add_of_the_same_attachment_is_not_released(node):
    """The release was for the ADD the operator saw; an ADD repeated for the same container and
    interface (cnitool, a runtime breaking the spec) starts over, strict."""
    assert cni(node, "ADD")[0] == 0
    assert release(node, "--container", "c1").returncode == 0
    assert cni(node, "ADD")[0] == 0
    assert state_files(node) == {"net1": ["c1:eth0.json", "c1:eth0.lock"]}
    code, out = cni(node, "DEL")
    assert (code, out["msg"]) == (1, STALE_DEL)


ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="a file of another user's: root makes one")
OTHER = 65534  # nobody


def _plant_record(node: Path, how: str) -> None:
    """A `.release` record beside c1's completed marker that is not root's own."""
    net = node / "state/networks/net1"
    record = net / "c1:eth0.release"
    body = json.dumps({"reason": "planted", "time": 1, "uid": 0})
    if how == "other-owner":
        # As issue 20 found it: written by another user while the network dir was mis-moded,
        # then the mode repaired; the record stays, owned by that user.
        net.chmod(0o777)
        record.write_text(body)
        os.chown(record, OTHER, OTHER)
        net.chmod(0o700)
    elif how in ("group-writable", "world-writable"):
        record.write_text(body)
        record.chmod(0o620 if how == "group-writable" else 0o602)
    elif how == "symlink":
        (node / "elsewhere.json").write_text(body)
        record.symlink_to(node / "elsewhere.json")
    elif how == "fifo":
        os.mkfifo(record, 0o600)
    elif how == "hard-link":
        (node / "kept.json").write_text(body)
        (node / "kept.json").chmod(0o600)
        os.link(node / "kept.json", record)


@pytest.mark.parametrize(
    ("how", "why"),
    [
        pytest.param("other-owner", f"owned by uid {OTHER}", marks=ROOT, id="other-owner"),
        pytest.param("group-writable", "writable by group or others", id="group-writable"),
        pytest.param("world-writable", "writable by group or others", id="world-writable"),
        pytest.param("symlink", "is a symlink", id="symlink"),
        pytest.param("fifo", "not a regular file", id="fifo"),
        pytest.param("hard-link", "2 hard links", id="hard-link"),
    ],
)
def test_a_release_record_that_is_not_roots_own_is_ignored(node, how, why):
    """Only root's own record may let a DEL leak state on purpose: anything else is ignored
    with a warning in the log, and the DEL stays strict."""
    assert cni(node, "ADD")[0] == 0
    _plant_record(node, how)
    code, out = cni(node, "DEL")
    assert (code, out["code"], out["msg"]) == (1, 7, STALE_DEL)
    line = log_lines(node)[-1]
    assert line["decision"] == "forward-strict"
    assert line["warning"].startswith("release record ignored: c1:eth0.release: ")
    assert why in line["warning"]
    assert "release" not in line
    assert json.loads((node / "state/networks/net1/c1:eth0.json").read_text())["state"] == (
        "completed"
    )


def test_the_logged_uid_is_the_records_owner_not_what_it_claims(node):
    assert cni(node, "ADD")[0] == 0
    assert release(node, "--container", "c1", "--reason", "daemon gone").returncode == 0
    record = node / "state/networks/net1/c1:eth0.release"
    claims = json.loads(record.read_text()) | {"uid": 4242, "time": float("inf")}
    record.write_text(json.dumps(claims))  # root's file still, claiming another uid
    assert cni(node, "DEL") == (0, None)
    raw = (node / "log").read_text().splitlines()[-1]
    line = json.loads(raw, parse_constant=_not_json)
    assert line["decision"] == "released"
    assert line["release"] == {"reason": "daemon gone", "uid": os.geteuid()}


def _not_json(name: str) -> float:
    raise AssertionError(f"{name} in a log line: not JSON")
