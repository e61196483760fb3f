"""tests/fakes/cilium_agent.py, run as a process: its API as cilium's client calls it, the
deletion queue it replays at start, the conflist it writes; and (when the peer is built) the real
cilium-cni against it in chained generic-veth mode, up, killed and never started.

The real plugin's deletion queue is a fixed path (/var/run/cilium/deleteQueue, pkg/defaults at
cilium v1.19.1), so every real-plugin test runs it in a node's own mount namespace
(tests/support/nodens.py), whose /run is the test's: the host's /run/cilium is never touched.
The pod's veth and its host end live in two network namespaces of that node, never the host's.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import cilium_agent
from tests.support import peers
from tests.support.nodens import NodeNS
from tests.support.records import read_jsonl
from tests.support.waiting import wait_for

AGENT = Path(cilium_agent.__file__)


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(str(self.path))


@dataclass
class Agent:
    """One run of the stand-in; `root` is where its socket and queue are seen from here."""

    root: Path
    proc: subprocess.Popen[bytes]

    @property
    def socket(self) -> Path:
        return self.root / "run" / "cilium" / "cilium.sock"

    @property
    def queue(self) -> Path:
        return self.root / "run" / "cilium" / "deleteQueue"

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        conn = UnixHTTP(self.socket, 10)
        try:
            data = None if body is None else json.dumps(body)
            conn.request(method, path, data, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        return resp.status, json.loads(raw) if raw else None

    def record(self) -> list[dict[str, Any]]:
        return read_jsonl(self.root / "agent.jsonl")

    def queued(self) -> list[str]:
        return sorted(p.name for p in self.queue.glob("*.delete"))

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(timeout=30)


def start(root: Path, enter: tuple[str, ...] = (), after: float = 0, *extra: str) -> Agent:
    """The stand-in with its default paths under root/run/cilium; inside a node (enter), its
    defaults are the node's own /var/run/cilium, which is root/run/cilium from here (nsenter
    execs it: the pid is the stand-in's)."""
    paths = () if enter else ("--socket", str(root / "run/cilium/cilium.sock"),
                              "--queue", str(root / "run/cilium/deleteQueue"))
    proc = subprocess.Popen(
        [*enter, sys.executable, "-I", str(AGENT), *paths, "--state", str(root / "endpoints"),
         "--record", str(root / "agent.jsonl"), "--start-after", str(after), *extra])
    agent = Agent(root, proc)
    if after == 0:
        wait_for(lambda: any(r.get("phase") == "listening" and r["pid"] == proc.pid
                             for r in agent.record()),
                 "the stand-in's API", timeout=30, every=0.05)
    return agent


@pytest.fixture
def root() -> Iterator[Path]:
    """A short temp dir: unix socket paths are limited to 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="dgca-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def agent(root: Path) -> Iterator[Agent]:
    a = start(root)
    try:
        yield a
    finally:
        a.stop(signal.SIGKILL)


EP = {"container-id": "c1", "container-interface-name": "eth0", "interface-name": "lxc1",
      "interface-index": 7, "mac": "02:00:00:00:00:01", "host-mac": "02:00:00:00:00:02",
      "addressing": {"ipv4": "10.16.0.5", "ipv6": ""}, "k8s-namespace": "default",
      "k8s-pod-name": "p1", "state": "waiting-for-identity", "sync-build-endpoint": True}


def test_config_answers_a_status(agent: Agent) -> None:
    status, body = agent.call("GET", "/v1/config")
    assert status == 200 and body["status"]["ipam-mode"] == "kubernetes"


@pytest.mark.parametrize(
    ("request_body", "status", "answer"),
    [
        pytest.param(EP, 201, None, id="new"),
        pytest.param(EP | {"addressing": {"ipv4": "10.16.0.6"}}, 400,
                     "endpoint for CNI attachment ID c1:eth0 already exists", id="same-attachment"),
        pytest.param(EP | {"container-id": "c2"}, 400, "IP 10.16.0.5 is already in use",
                     id="same-ip"),
        pytest.param(EP | {"container-id": "c2", "container-interface-name": "net1",
                           "addressing": {"ipv4": "10.16.0.7"}}, 201, None, id="other"),
        pytest.param({"mac": "x"}, 400, "invalid endpoint change request", id="no-container"),
    ],
)
def test_put_endpoint(agent: Agent, request_body: dict[str, Any], status: int,
                      answer: str | None) -> None:
    if request_body is not EP:
        assert agent.call("PUT", "/v1/endpoint/cilium-local:0", EP)[0] == 201
    got, body = agent.call("PUT", "/v1/endpoint/cilium-local:0", request_body)
    assert got == status
    if answer is not None:
        assert body == answer
    else:
        net = body["status"]["networking"]
        assert isinstance(body["id"], int) and net["mac"] == request_body["mac"], body


def test_delete_by_container_id(agent: Agent) -> None:
    agent.call("PUT", "/v1/endpoint/cilium-local:0", EP)
    assert agent.call("DELETE", "/v1/endpoint", {"container-id": "c1"}) == (200, None)
    assert agent.call("DELETE", "/v1/endpoint", {"container-id": "c1"}) == (
        404, "endpoints not found")
    assert agent.call("DELETE", "/v1/endpoint", {}) == (400, "invalid container id")


@pytest.mark.parametrize(
    ("endpoint_id", "status"),
    [
        pytest.param("cni-attachment-id:c1:eth0", 200, id="attachment"),
        pytest.param("cni-attachment-id:c1", 200, id="container-only"),
        pytest.param("cni-attachment-id:c1:net1", 404, id="other-interface"),
        pytest.param("cilium-local:1", 200, id="cilium-id"),
        pytest.param("cilium-local:9", 404, id="no-such-id"),
    ],
)
def test_endpoint_healthz(agent: Agent, endpoint_id: str, status: int) -> None:
    agent.call("PUT", "/v1/endpoint/cilium-local:0", EP)
    got, body = agent.call("GET", f"/v1/endpoint/{endpoint_id}/healthz")
    assert got == status
    assert status != 200 or body["overallHealth"] == "OK"


def test_down_removes_the_socket_and_stale_keeps_it(root: Path) -> None:
    a = start(root)
    a.stop(signal.SIGTERM)
    assert not a.socket.exists() and a.socket.parent.is_dir()
    a = start(root)
    a.stop(signal.SIGKILL)
    assert stat.S_ISSOCK(a.socket.stat().st_mode)
    with pytest.raises(ConnectionRefusedError):
        a.call("GET", "/v1/config")


def test_booting_removes_an_old_socket_at_once_and_serves_only_later(root: Path) -> None:
    a = start(root)
    a.stop(signal.SIGKILL)
    b = start(root, (), 600.0)
    try:
        wait_for(lambda: not a.socket.exists(), "the old socket to go", timeout=30)
        assert a.socket.parent.is_dir() and b.record()[-1]["phase"] == "listening"
        assert b.record()[-1]["pid"] == a.proc.pid, "only the first run listened"
    finally:
        b.stop(signal.SIGKILL)
    c = start(root, (), 0.5)
    try:
        wait_for(c.socket.exists, "the booted agent's socket", timeout=60)
    finally:
        c.stop(signal.SIGKILL)


def test_start_replays_the_queue(root: Path) -> None:
    a = start(root)
    a.call("PUT", "/v1/endpoint/cilium-local:0", EP)
    a.call("PUT", "/v1/endpoint/cilium-local:0", EP | {"container-id": "c2",
                                                        "addressing": {"ipv4": "10.16.0.6"}})
    a.stop()
    (a.queue / "a.delete").write_text(json.dumps({"container-id": "c1"}))
    (a.queue / "b.delete").write_text("cilium-local:2")  # the legacy form: an endpoint ID
    (a.queue / "c.delete").write_text(json.dumps({"container-id": "gone"}))
    b = start(root)
    try:
        replayed = [(r["file"], r["deleted"]) for r in b.record() if r.get("phase") == "replayed"]
        assert replayed == [("a.delete", 1), ("b.delete", 1), ("c.delete", 0)]
        assert b.queued() == [] and (b.queue / "lockfile").exists()
        assert b.call("DELETE", "/v1/endpoint", {"container-id": "c1"})[0] == 404
    finally:
        b.stop(signal.SIGKILL)


def test_writes_cozystacks_conflist_when_up(root: Path) -> None:
    dest = root / "05-cilium.conflist"
    a = start(root, (), 0, "--write-cni-conf", str(dest))
    try:
        wait_for(dest.exists, "the conflist", timeout=30)
    finally:
        a.stop()
    assert dest.read_text() == cilium_agent.COZYSTACK_CONFLIST
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    conf = json.loads(dest.read_text())
    assert (conf["name"], conf["cniVersion"]) == ("generic-veth", "0.3.1")
    ovn, portmap, cilium = conf["plugins"]
    assert ovn["server_socket"] == ovn["ipam"]["server_socket"] == (
        "/run/openvswitch/kube-ovn-daemon.sock")
    assert portmap == {"type": "portmap", "snat": True, "capabilities": {"portMappings": True}}
    assert cilium == {"type": "cilium-cni"}, "chained by the network's name, generic-veth"


# --- the real plugin against it ------------------------------------------------------------------

CID = "0123456789abcdef"
CNI_ARGS = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p1;K8S_POD_UID=u1"


@dataclass
class Pod:
    """A node of its own (mount namespace), a host netns in it, and a pod netns whose eth0 is
    a veth with its peer in the host netns and an address: what kube-ovn leaves for cilium."""

    node: NodeNS
    host: str
    pod: str
    mac: str

    def prev_result(self) -> dict[str, Any]:
        return {"cniVersion": "0.3.1",
                "interfaces": [{"name": "eth0", "mac": self.mac, "sandbox": self.pod}],
                "ips": [{"version": "4", "interface": 0, "address": "10.16.0.5/16",
                         "gateway": "10.16.0.1"}]}

    def cilium(self, command: str, timeout: float = 120,
               version: str = "0.3.1") -> tuple[int, Any, str]:
        """Run the real cilium-cni in the node's host netns: (exit code, stdout JSON, stderr)."""
        peer = peers.built_or_skip("cilium", "v1.19.1")
        conf = {"cniVersion": version, "name": "generic-veth", "type": "cilium-cni",
                "prevResult": self.prev_result() | {"cniVersion": version}}
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CNI_COMMAND": command,
               "CNI_CONTAINERID": CID, "CNI_NETNS": self.pod, "CNI_IFNAME": "eth0",
               "CNI_ARGS": CNI_ARGS, "CNI_PATH": str(self.node.tmp / "no-plugins")}
        res = self.node.run(["nsenter", f"--net={self.host}", "--", str(peer.bin("cilium-cni"))],
                            timeout=timeout, env=env, stdin=json.dumps(conf))
        return res.returncode, json.loads(res.stdout) if res.stdout else None, res.stderr

    def agent(self, after: float = 0) -> Agent:
        return start(self.node.tmp, self.node.enter, after)

    @property
    def queue(self) -> Path:
        return self.node.tmp / "run" / "cilium" / "deleteQueue"


@contextlib.contextmanager
def make_pod() -> Iterator[Pod]:
    node = NodeNS.create(prefix="dgci-")
    try:
        host, pod_ns = node.add_netns("dgch"), node.add_netns("dgcp")
        pod_name, host_name = pod_ns.rsplit("/", 1)[1], host.rsplit("/", 1)[1]
        for argv in (
            ["ip", "-n", pod_name, "link", "add", "eth0", "type", "veth", "peer", "name",
             "lxcdg0", "netns", host_name],
            ["ip", "-n", pod_name, "addr", "add", "10.16.0.5/16", "dev", "eth0"],
            ["ip", "-n", pod_name, "link", "set", "eth0", "up"],
            ["ip", "-n", host_name, "link", "set", "lxcdg0", "up"],
        ):
            res = node.run(argv)
            assert res.returncode == 0, (argv, res.stderr)
        shown = node.run(["ip", "-n", pod_name, "-j", "link", "show", "eth0"])
        yield Pod(node, host, pod_ns, json.loads(shown.stdout)[0]["address"])
    finally:
        node.close()


@pytest.fixture
def pod() -> Iterator[Pod]:
    for tool in ("unshare", "nsenter", "ip"):
        if os.geteuid() != 0 or shutil.which(tool) is None:
            pytest.skip(f"needs root and {tool}")
    peers.built_or_skip("cilium", "v1.19.1")
    with make_pod() as made:
        yield made


def test_real_plugin_add_and_del_with_the_agent_up(pod: Pod) -> None:
    agent = pod.agent()
    try:
        rc, out, err = pod.cilium("ADD")
        assert rc == 0, (out, err)
        assert out["interfaces"] == pod.prev_result()["interfaces"], "generic-veth passes it on"
        (put,) = [r for r in agent.record() if r.get("method") == "PUT"]
        sent = put["request"]
        assert put["status"] == 201 and sent["container-id"] == CID
        assert (sent["container-interface-name"], sent["interface-name"]) == ("eth0", "lxcdg0")
        assert sent["addressing"]["ipv4"] == "10.16.0.5" and sent["mac"] == pod.mac
        assert sent["k8s-pod-name"] == "p1" and sent["datapath-configuration"]["external-ipam"]
        rc, out, err = pod.cilium("ADD")
        assert (rc, out["code"]) == (1, 999), "a second ADD of the attachment: the agent's 400"
        assert "already exists" in out["msg"], out
        # CHECK (which a runtime sends from cniVersion 0.4.0 on): the endpoint's health
        assert pod.cilium("CHECK", version="1.0.0")[:2] == (0, None)
        for _ in range(2):  # the second DEL finds nothing: the agent's 404 is success
            assert pod.cilium("DEL")[:2] == (0, None)
        rc, out, _ = pod.cilium("CHECK", version="1.0.0")
        assert (rc, out["code"], out["msg"]) == (1, 100, "HealthzFailed"), out
        deletes = [r["status"] for r in agent.record() if r.get("method") == "DELETE"]
        assert deletes == [200, 404]
        assert list(pod.queue.glob("*.delete")) == []
    finally:
        agent.stop(signal.SIGKILL)


def test_real_plugin_del_with_no_agent_queues_and_the_agent_replays_it(pod: Pod) -> None:
    """No agent ever on this node (no /run/cilium, as after a reboot before its pod starts)."""
    rc, out, err = pod.cilium("DEL")
    assert (rc, out) == (0, None), err
    (entry,) = pod.queue.glob("*.delete")
    assert json.loads(entry.read_text()) == {"container-id": CID}
    agent = pod.agent()
    try:
        assert [r["file"] for r in agent.record() if r.get("phase") == "replayed"] == [entry.name]
        assert list(pod.queue.glob("*.delete")) == []
    finally:
        agent.stop(signal.SIGKILL)


def test_real_plugin_del_with_the_agent_killed_queues(pod: Pod) -> None:
    """The agent killed (its socket stays and refuses): DEL queues; the restarted agent deletes
    the endpoint from the queue."""
    agent = pod.agent()
    assert pod.cilium("ADD")[0] == 0
    agent.stop(signal.SIGKILL)
    assert pod.cilium("DEL")[:2] == (0, None)
    assert len(list(pod.queue.glob("*.delete"))) == 1
    agent = pod.agent()
    try:
        assert [r["deleted"] for r in agent.record() if r.get("phase") == "replayed"] == [1]
        assert agent.call("DELETE", "/v1/endpoint", {"container-id": CID})[0] == 404
    finally:
        agent.stop(signal.SIGKILL)


def test_real_plugin_del_fails_past_256_queued_entries(pod: Pod) -> None:
    """The queue dir may hold 256 entries, its lock file counted. The agent is dead with its
    socket left behind (a socket dir without a socket would add the plugin's 3 x 5 s wait for a
    booting agent to each DEL)."""
    pod.queue.mkdir(parents=True)
    (pod.queue / "lockfile").touch()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(pod.queue.parent / "cilium.sock"))  # closed unlistened: refuses
    for n in range(255):
        (pod.queue / f"{n:064x}.delete").write_text("{}")
    assert pod.cilium("DEL")[:2] == (0, None), "the 256th entry is queued"
    rc, out, _ = pod.cilium("DEL", timeout=120)  # the same request: its file is already there
    assert (rc, out["code"]) == (1, 999)
    assert out["msg"].endswith("has too many entries; aborting"), out


def test_real_plugin_add_with_the_agent_down_fails(pod: Pod) -> None:
    rc, out, err = pod.cilium("ADD")
    assert (rc, out["code"]) == (1, 999), err
    assert out["msg"].startswith(
        "unable to connect to Cilium agent: failed to create cilium agent client after "
        "30.000000 seconds timeout"), out
