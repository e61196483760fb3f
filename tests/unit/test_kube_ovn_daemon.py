"""tests/fakes/kube_ovn_daemon.py, run as a process: each mode's answer, what it records, and (when
the peer is built) the real kube-ovn CNI plugin talking to it."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.kube_ovn_controller import KubeOvnController, pod_address
from tests.fakes.kube_ovn_daemon import nic_names
from tests.support import peers
from tests.support.daemon import Daemon, Record
from tests.support.kubeapi import KubeAPI
from tests.support.records import read_jsonl
from tests.support.waiting import wait_for

DAEMON = Path(__file__).resolve().parents[1] / "fakes" / "kube_ovn_daemon.py"
ARGS = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p1"
NODE = "node-a"
SCALE = 0.02  # kube-ovn's seconds, shrunk: 20 looks in 0.4 s, 30 s in 0.6 s, 200 ARPs in 4 s


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("dummy", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(str(self.path))


@dataclass
class StandIn:
    tmp: Path
    process: Daemon

    @property
    def socket(self) -> Path:
        return self.tmp / "d.sock"

    def mode(self, **modes: Any) -> None:
        (self.tmp / "settings.json").write_text(json.dumps(modes))

    def post(self, endpoint: str, body: dict[str, Any],
             timeout: float = 10) -> tuple[int, dict[str, Any] | None]:
        conn = UnixHTTP(self.socket, timeout)
        try:
            conn.request("POST", f"/api/v1/{endpoint}", json.dumps(body),
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        return resp.status, json.loads(data) if data else None

    def record(self) -> list[dict[str, Any]]:
        return read_jsonl(self.tmp / "record.jsonl")

    def ports(self) -> list[str]:
        return sorted(p.name for p in (self.tmp / "ports").iterdir())


def start(tmp: Path, node: str, after: float = 0, api: KubeAPI | None = None) -> StandIn:
    """Started, not yet awaited: ready once it has recorded that it listens (it binds first).
    With `api`, its pods are that server's pods of NODE."""
    cache = [] if api is None else ["--api", api.url, "--api-ca", str(api.cert), "--node", NODE]
    process = Daemon(
        "the kube-ovn daemon stand-in",
        [sys.executable, "-I", str(DAEMON), "--socket", str(tmp / "d.sock"), "--settings",
         str(tmp / "settings.json"), "--record", str(tmp / "record.jsonl"), "--ports",
         str(tmp / "ports"), "--node-netns", node, *cache, "--start-after", str(after)],
        tmp / "daemon.log",
        ready=Record(tmp / "record.jsonl", lambda r: r["phase"] == "listening", "listening"))
    process.start(wait=False)
    return StandIn(tmp, process)


def _own_netns() -> Iterator[str]:
    """A network namespace of its own, held by a process, as a path."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare")
    holder = subprocess.Popen(["unshare", "--net", "sleep", "300"])
    try:
        path = f"/proc/{holder.pid}/ns/net"
        wait_for(lambda: os.readlink(path) != os.readlink("/proc/self/ns/net"),
                 "the holder's netns", timeout=30)
        yield path
    finally:
        holder.kill()
        holder.wait()


@pytest.fixture
def netns() -> Iterator[str]:
    """A pod's (the stand-in makes the pod's interface in it; the plugin refuses to run in the
    one it is in)."""
    yield from _own_netns()


@pytest.fixture
def node() -> Iterator[str]:
    """The node's, where the host ends go: never the machine's own."""
    yield from _own_netns()


@pytest.fixture
def daemon(tmp_path: Path, node: str) -> Iterator[StandIn]:
    d = start(tmp_path, node)
    try:
        d.process.wait_ready(timeout=30)
        yield d
    finally:
        d.process.kill()


def links(netns: str) -> dict[str, str]:
    """The netns's veths: name -> the peer's ifindex as `ip -o link` shows it (name@ifN)."""
    out = subprocess.run(["nsenter", f"--net={netns}", "ip", "-o", "link", "show", "type",
                          "veth"], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        name, _, peer = line.split(": ")[1].partition("@")
        found[name] = peer
    return found


def ifindex(netns: str, name: str) -> str:
    out = subprocess.run(["nsenter", f"--net={netns}", "ip", "-o", "link", "show", name],
                         capture_output=True, text=True, check=True).stdout
    return "if" + out.split(":")[0]


REQ = {"cni_type": "kube-ovn", "pod_name": "p1", "pod_namespace": "default",
       "container_id": "c1", "net_ns": "/var/run/netns/x", "if_name": "eth0", "provider": "ovn"}


def test_healthy_add_answers_a_cni_response_and_makes_the_pods_nic(daemon: StandIn,
                                                                  netns: str, node: str) -> None:
    status, body = daemon.post("add", REQ | {"net_ns": netns})
    assert status == 200
    assert body is not None
    assert body["protocol"] == "IPv4" and body["nicname"] == "eth0"
    assert body["address"].startswith("10.16.") and body["cidr"] == "10.16.0.0/16"
    assert daemon.ports() == ["c1:eth0"]
    shown = subprocess.run(["nsenter", f"--net={netns}", "ip", "-o", "-4", "addr", "show",
                            "dev", "eth0"], capture_output=True, text=True, check=True)
    assert f"{body['address']}/16" in shown.stdout
    assert list(links(netns)) == ["eth0"], "the pod has its end only"
    assert links(node) == {"c1_h": ifindex(netns, "eth0")}, "the host end is the node's"
    assert links(netns)["eth0"] == ifindex(node, "c1_h")
    assert daemon.post("add", REQ | {"net_ns": netns})[0] == 200, "a repeated ADD keeps it"
    assert list(links(node)) == ["c1_h"]


@pytest.mark.parametrize(("container", "ifname", "host", "pod"), [
    pytest.param("0123456789abcdef", "eth0", "0123456789ab_h", "0123456789ab_c", id="eth0"),
    pytest.param("0123456789abcdef", "net1", "01234567_net1_h", "01234567_net1_c", id="net1"),
    pytest.param("0123456789abcdef", "pod1a2b3c4d5e6", "01234_1a2b3c4_h", "01234_1a2b3c4_c",
                 id="kubevirt"),
])
def test_nic_names_are_kube_ovns(container: str, ifname: str, host: str, pod: str) -> None:
    assert nic_names(container, ifname) == (host, pod)


def test_add_into_a_netns_that_is_not_there_fails(daemon: StandIn) -> None:
    status, body = daemon.post("add", REQ)
    assert status == 500 and body is not None and "configure nic failed" in body["error"]
    assert daemon.ports() == []


def test_del_is_idempotent_and_skips_an_empty_netns(daemon: StandIn, netns: str,
                                                    node: str) -> None:
    daemon.post("add", REQ | {"net_ns": netns})
    assert daemon.post("del", REQ | {"net_ns": ""}) == (204, None)
    assert daemon.ports() == ["c1:eth0"], "a DEL without netns touches no port (handler.go)"
    assert list(links(node)) == ["c1_h"]
    assert daemon.post("del", REQ) == (204, None)
    assert daemon.ports() == []
    assert links(node) == {} and links(netns) == {}, "the pair went with the host end"
    assert daemon.post("del", REQ) == (204, None)  # the port already gone: success


def test_error_mode_answers_500_with_the_reason(daemon: StandIn) -> None:
    daemon.mode(**{"add": "error", "del": "error"})
    status, body = daemon.post("del", REQ)
    assert status == 500 and body is not None and "del failed" in body["error"]
    assert daemon.post("add", REQ)[0] == 500


def test_hang_mode_never_answers_and_records_the_request(daemon: StandIn) -> None:
    daemon.mode(**{"del": "hang"})
    with pytest.raises(TimeoutError):
        daemon.post("del", REQ, timeout=1.5)

    def phases() -> list[str]:
        return [r["phase"] for r in daemon.record() if r.get("path") == "/api/v1/del"]

    # (its handler may not have written "hung" yet when the client gave up, on a loaded machine)
    wait_for(lambda: "hung" in phases(), "the stand-in to record the hung request", timeout=30)
    assert phases() == ["start", "hung"]
    assert daemon.post("add", REQ)[0] == 500, "the other endpoint still answers"


def test_slow_mode_answers_after_the_delay(daemon: StandIn) -> None:
    daemon.mode(**{"del": "slow", "delay": 1.0})
    began = time.monotonic()
    assert daemon.post("del", REQ)[0] == 204
    assert time.monotonic() - began >= 1.0


def test_unknown_route_is_404(daemon: StandIn) -> None:
    assert daemon.post("check", REQ)[0] == 404


def test_start_after_binds_only_later(tmp_path: Path, node: str) -> None:
    """Down (no socket) for the delay, then it binds and says so; it serves from then on."""
    began, wall = time.monotonic(), time.time()
    d = start(tmp_path, node, after=2.0)
    try:
        assert not d.socket.exists()
        said = d.process.wait_ready(timeout=60)
        assert time.monotonic() - began >= 2.0
        assert isinstance(said, dict) and said["t"] - wall >= 1.5
        assert d.socket.exists(), "it binds before it says it listens"
        assert [r["phase"] for r in d.record() if r["phase"] != "gc"] == ["listening"]
        assert d.post("del", REQ) == (204, None)
    finally:
        d.process.kill()


# --- the real plugin against it ------------------------------------------------------------------


def plugin(command: str, conf: dict[str, Any], netns: str) -> tuple[int, Any]:
    peer = peers.built_or_skip("kube-ovn", "v1.14.10")
    env = {"PATH": "/usr/bin:/bin", "CNI_COMMAND": command, "CNI_CONTAINERID": "c1",
           "CNI_IFNAME": "eth0", "CNI_NETNS": netns, "CNI_ARGS": ARGS, "CNI_PATH": "/"}
    res = subprocess.run([str(peer.bin("cni"))], input=json.dumps(conf), env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    return res.returncode, json.loads(res.stdout) if res.stdout else None


def test_the_real_plugin_speaks_to_it(daemon: StandIn, netns: str, node: str) -> None:
    conf = {"cniVersion": "0.3.1", "name": "kube-ovn", "type": "kube-ovn",
            "server_socket": str(daemon.socket)}
    rc, out = plugin("ADD", conf, netns)
    assert rc == 0, out
    assert out["interfaces"][0]["name"] == "eth0" and out["ips"][0]["gateway"] == "10.16.0.1"
    assert list(links(node)) == ["c1_h"]
    assert plugin("DEL", conf, netns) == (0, None)
    assert daemon.ports() == [] and links(node) == {}
    daemon.mode(**{"del": "error"})
    rc, out = plugin("DEL", conf, netns)
    assert (rc, out["code"], out["msg"]) == (1, 11, "RPC failed")
    assert "delete ip return 500" in out["details"]
    rc, out = plugin("DEL", {k: v for k, v in conf.items() if k != "server_socket"}, netns)
    assert (rc, out["code"]) == (1, 7) and "server_socket is required" in out["details"]


# --- kube-ovn's timing and clean-up, against the chain's API server ------------------------------



@pytest.fixture
def cached(tmp_path: Path, node: str, api: KubeAPI) -> Iterator[StandIn]:
    """The stand-in with its pod cache on `api`, its seconds scaled by SCALE."""
    d = start(tmp_path, node, api=api)
    d.mode(scale=SCALE)
    try:
        d.process.wait_ready(timeout=30)
        yield d
    finally:
        d.process.kill()


def looks(d: StandIn) -> list[bool]:
    """Its looks for the pod's annotations: whether each found the pod."""
    return [r["found"] for r in d.record() if r["phase"] == "look"]


def allocated(api: KubeAPI) -> None:
    """p1 in the API, its address allocated by the controller stand-in."""
    api.put_pod("default", "p1", "uid-1", NODE)
    controller = KubeOvnController(api, NODE)
    controller.reconcile()
    assert [a.key for a in controller.held()] == ["default/p1"]


def test_add_for_a_pod_not_in_the_cache_fails_at_once(cached: StandIn, netns: str) -> None:
    status, body = cached.post("add", REQ | {"net_ns": netns})
    assert status == 500 and body is not None and "get pod default/p1 failed" in body["error"]
    assert looks(cached) == [False]


def test_add_waits_20_looks_for_the_address_then_fails(cached: StandIn, netns: str,
                                                      node: str, api: KubeAPI) -> None:
    api.put_pod("default", "p1", "uid-1", NODE)  # no controller: never allocated
    status, body = cached.post("add", REQ | {"net_ns": netns})
    assert status == 500 and body is not None
    assert body["error"].startswith("no address allocated to pod default/p1")
    assert looks(cached) == [True] * 20
    assert cached.ports() == [] and links(node) == {}


def test_add_takes_the_controllers_address(cached: StandIn, netns: str, api: KubeAPI) -> None:
    allocated(api)
    status, body = cached.post("add", REQ | {"net_ns": netns})
    assert status == 200 and body is not None
    assert body["address"] == pod_address("default", "p1")


@pytest.mark.parametrize(("settings", "status", "error"), [
    pytest.param({"ovn_installed_after": 29}, 200, "", id="ovn-installed-within-30s"),
    pytest.param({"ovn_installed_after": 31}, 500, "is not ready after 30s",
                 id="ovn-installed-too-late"),
    pytest.param({"gateway_after": 150}, 200, "", id="gateway-at-150s"),
    pytest.param({"gateway_after": None}, 500, "not ready for interface eth0 after 200 checks",
                 id="gateway-never"),
    pytest.param({"add": "ovsdb-down"}, 500, "ovs-vsctl --timeout=30 add-port", id="ovsdb-down"),
])
def test_add_fails_as_kube_ovn_does_and_rolls_back(
        cached: StandIn, netns: str, node: str, api: KubeAPI, settings: dict[str, Any],
        status: int, error: str) -> None:
    allocated(api)
    cached.mode(scale=SCALE, **settings)
    got, body = cached.post("add", REQ | {"net_ns": netns}, timeout=60)
    assert body is not None and (got, error in body["error"]) == (status, True)
    made = status == 200
    assert cached.ports() == (["c1:eth0"] if made else []), "the port rolled back"
    assert list(links(node)) == (["c1_h"] if made else []), "the pair rolled back"
    assert list(links(netns)) == (["eth0"] if made else [])


def test_the_gateway_check_stops_when_the_pod_is_deleted(cached: StandIn, netns: str,
                                                         node: str, api: KubeAPI) -> None:
    allocated(api)
    cached.mode(scale=SCALE, gateway_after=None)
    with ThreadPoolExecutor(max_workers=1) as pool:
        answer = pool.submit(cached.post, "add", REQ | {"net_ns": netns}, 60)
        wait_for(lambda: [r for r in cached.record() if r["phase"] == "port"],
                 "the port to be made", timeout=30, every=0.02)
        api.delete_pod("default", "p1")  # while it sends ARPs
        status, body = answer.result()
    assert status == 500 and body is not None
    assert "gateway check canceled" in body["error"]
    assert "after 200 checks" not in body["error"]
    assert cached.ports() == [] and links(node) == {}


def test_del_with_ovsdb_down_answers_500_and_keeps_the_port(cached: StandIn, netns: str,
                                                           node: str, api: KubeAPI) -> None:
    allocated(api)
    assert cached.post("add", REQ | {"net_ns": netns})[0] == 200
    cached.mode(scale=SCALE, **{"del": "ovsdb-down"})
    status, body = cached.post("del", REQ | {"net_ns": netns})
    assert status == 500 and body is not None and "del-port br-int c1_h" in body["error"]
    assert cached.ports() == ["c1:eth0"] and list(links(node)) == ["c1_h"]


def gc_passes(d: StandIn) -> list[dict[str, Any]]:
    return [r for r in d.record() if r["phase"] == "gc"]


def gc_lines(d: StandIn) -> list[tuple[str, str]]:
    return [(r["port"], r["why"]) for r in d.record()
            if r["phase"] == "port" and r["event"] == "removed" and r["why"].startswith("gc")]


def test_gc_removes_the_port_whose_veth_is_gone(cached: StandIn, netns: str, node: str,
                                                api: KubeAPI) -> None:
    """A pod's netns deleted without a DEL (the DEL never reached the daemon): the pair goes
    with it, and the next pass (60 s, scaled) removes the port."""
    allocated(api)
    assert cached.post("add", REQ | {"net_ns": netns})[0] == 200
    subprocess.run(["nsenter", f"--net={netns}", "ip", "link", "del", "eth0"], check=True)
    wait_for(lambda: gc_lines(cached), "a GC pass", timeout=30, every=0.1)
    assert gc_lines(cached) == [("c1:eth0", "gc: no such device")]
    assert cached.ports() == []


@pytest.mark.parametrize(("pod_there", "link_up", "kept"), [
    pytest.param(False, False, False, id="down-and-no-pod-removed"),
    pytest.param(True, False, True, id="down-but-pod-there-kept"),
    pytest.param(False, True, True, id="up-kept-whatever-the-pod"),
])
def test_gc_looks_only_at_links_not_up(cached: StandIn, netns: str, node: str, api: KubeAPI,
                                       pod_there: bool, link_up: bool, kept: bool) -> None:
    """ListInterfacePodMap finds interfaces whose link_state is not up; of those, a pod not in
    the cache loses its port."""
    allocated(api)
    assert cached.post("add", REQ | {"net_ns": netns})[0] == 200
    if not link_up:
        subprocess.run(["nsenter", f"--net={netns}", "ip", "link", "set", "eth0", "down"],
                       check=True)
    if not pod_there:
        api.delete_pod("default", "p1")
    done = len(gc_passes(cached))
    wait_for(lambda: len(gc_passes(cached)) >= done + 2, "two more GC passes", timeout=30,
             every=0.1)
    assert cached.ports() == (["c1:eth0"] if kept else [])
    assert list(links(node)) == ["c1_h"], "CleanInterface removes the port, not the link"


@pytest.mark.parametrize(("command", "settings", "said"), [
    pytest.param("ADD", {"ovn_installed_after": 31}, "is not ready after 30s",
                 id="add-ovn-installed-too-late"),
    pytest.param("ADD", {"add": "ovsdb-down"}, "add-port br-int c1_h", id="add-ovsdb-down"),
    pytest.param("DEL", {"del": "ovsdb-down"}, "del-port br-int c1_h", id="del-ovsdb-down"),
])
def test_the_real_plugin_turns_each_500_into_rpc_failed(
        cached: StandIn, netns: str, api: KubeAPI, command: str, settings: dict[str, Any],
        said: str) -> None:
    allocated(api)
    conf = {"cniVersion": "0.3.1", "name": "kube-ovn", "type": "kube-ovn",
            "server_socket": str(cached.socket)}
    if command == "DEL":
        assert plugin("ADD", conf, netns)[0] == 0
    cached.mode(scale=SCALE, **settings)
    rc, out = plugin(command, conf, netns)
    assert (rc, out["code"], out["msg"]) == (1, 11, "RPC failed")
    assert said in out["details"]
