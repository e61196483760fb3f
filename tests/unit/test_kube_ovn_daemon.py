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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.kube_ovn_daemon import nic_names
from tests.support import peers
from tests.support.daemon import Daemon, Record
from tests.support.records import read_jsonl
from tests.support.waiting import wait_for

DAEMON = Path(__file__).resolve().parents[1] / "fakes" / "kube_ovn_daemon.py"
ARGS = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p1"


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


def start(tmp: Path, node: str, after: float = 0) -> StandIn:
    """Started, not yet awaited: ready once it has recorded that it listens (it binds first)."""
    process = Daemon(
        "the kube-ovn daemon stand-in",
        [sys.executable, "-I", str(DAEMON), "--socket", str(tmp / "d.sock"), "--settings",
         str(tmp / "settings.json"), "--record", str(tmp / "record.jsonl"), "--ports",
         str(tmp / "ports"), "--node-netns", node, "--start-after", str(after)],
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
        assert [r["phase"] for r in d.record()] == ["listening"]
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
