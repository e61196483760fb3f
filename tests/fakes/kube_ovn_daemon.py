"""STAND-IN, for tests only: kube-ovn's CNI daemon (kube-ovn-cni's cniserver), as the real
kube-ovn CNI plugin (peers/pins.tsv's kube-ovn row) talks to it, without OVS, OVN or an API.

The real daemon needs Open vSwitch, an OVN database and kube-ovn's controller and CRDs; no
installable part here can be it. What this process copies from kube-ovn v1.15.3, and nothing more:

- Where it listens: an HTTP server on the unix socket /run/openvswitch/kube-ovn-daemon.sock
  (dist/images/start-cniserver.sh:4; the conflist's `server_socket`), run inside the node, so it
  goes with the node's /run at a power-off as its DaemonSet pod's socket does.
- The routes: POST /api/v1/add and POST /api/v1/del, JSON bodies (pkg/daemon/server.go:43-55),
  the request being request.CniRequest (pkg/request/cniserver.go:23-42: cni_type, pod_name,
  pod_namespace, container_id, net_ns, if_name, provider, ...).
- add: 200 with a request.CniResponse (pkg/request/cniserver.go:44-55; pkg/daemon/handler.go:
  381-393: protocol, address, mac_address, cidr, gateway, mtu, nicname); the plugin turns it into
  its CNI result (cmd/cni/cni.go generateCNIResult). Before it answers, the real daemon gives
  the pod its interface: a veth pair made in the node's network namespace (kube-ovn-cni runs
  with hostNetwork), named by generateNicName (pkg/daemon/ovs_linux.go:384-394: the container
  ID's first 12 characters and `_h` / `_c` for eth0, `<id>_<ifname>_h` otherwise), the `_c` end
  moved into the pod's netns and renamed `if_name` with the address, the `_h` end left up in the
  node and added to br-int (ovs_linux.go:74-160 configureNic, 1630-1649 setupVethPair). The
  stand-in makes the pair the same way, in the network namespace given as --node-netns: the
  node's, where the runtime and its CNI plugins run (cilium-cni's generic-veth chaining looks
  the host end up there by the pod end's peer index: cilium v1.19.1 plugins/cilium-cni/chaining/
  generic-veth/generic-veth.go). A runtime that reads the pod's address from the netns (CRI-O's
  network status without a cached result) finds it as with kube-ovn. A netns it cannot enter
  fails the add (500). It records a "port" per attachment (<ports>/<container_id>:<if_name>,
  holding the request and the host end's name), standing for the OVS port and IP the real one
  makes.
- del: 204 with no body; at once when net_ns is empty (handler.go:457-460), otherwise after
  removing the port and the host end of the veth (which takes the pod's end with it), each of
  which may be gone already (ovs_linux.go:299-355 deleteNic: del-port with --if-exists, a host
  link not found is success): the daemon's DEL is idempotent.
- Failures: 500 with a CniResponse whose `error` says why (handler.go:533-536). The plugin's client
  (pkg/request/cniserver.go:58-81) turns any status but 200 (add) or 204 (del), and any transport
  error, into CNI error code 11 "RPC failed" (cmd/cni/cni.go:75, 197).

Modes (its settings file, read for every request, so a test switches them between calls; `add`
and `del` each take one):
    healthy  answer as above
    hang     accept and read the request, never answer (an unhealthy OVSDB: every ovs-vsctl the
             real handler runs waits up to 30 s, and nothing bounds the handler; the plugin's
             client has no timeout either: the caller's deadline ends it)
    slow     answer as healthy after `delay` seconds
    error    answer 500
"down" is no process and no socket (the chain stops it and removes the socket, as
start-cniserver.sh:8-12 does on exit); "restart" is down for a while, then healthy: started with
--start-after SECONDS, it binds its socket only then.

Every request is appended to a JSON-lines record: a `start` line with the path and the request
body when it arrives, an `end` line with the status when it answers (none for a hung one), so a
test counts the DELs that reached the daemon. Standard library only: it runs as
`python3 -I kube_ovn_daemon.py ...` inside the node's mount namespace.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

SOCKET = "/run/openvswitch/kube-ovn-daemon.sock"  # dist/images/start-cniserver.sh:4
MODES = ("healthy", "hang", "slow", "error")
CIDR = "10.16.0.0/16"  # kube-ovn's default pod CIDR (ovn-default)
GATEWAY = "10.16.0.1"
MTU = 1400  # kube-ovn's default MTU on a Geneve overlay: 1500 less the tunnel's 100
MAX_BODY = 1 << 20


def _append(path: str, entry: dict[str, Any]) -> None:
    """One JSON line, one write on an O_APPEND descriptor (lines never interleave)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
    finally:
        os.close(fd)


def address(container_id: str) -> str:
    """An address in kube-ovn's pod CIDR, from the container ID (repeated ADDs agree)."""
    digest = hashlib.sha256(container_id.encode()).digest()
    return f"10.16.{digest[0]}.{digest[1] % 253 + 2}"


def mac(container_id: str) -> str:
    digest = hashlib.sha256(container_id.encode()).digest()
    return "00:00:00:" + ":".join(f"{b:02x}" for b in digest[2:5])


class Daemon:
    """The daemon's state: its settings file, its record and its ports."""

    def __init__(self, settings: str, record: str, ports: str, node_netns: str) -> None:
        self.settings, self.record, self.ports = settings, record, ports
        self.node_netns = node_netns
        os.makedirs(ports, exist_ok=True)

    def mode(self, endpoint: str) -> tuple[str, float]:
        try:
            with open(self.settings, encoding="utf-8") as f:
                body = json.load(f)
        except (OSError, ValueError):
            body = {}
        mode = str(body.get(endpoint, "healthy"))
        return (mode if mode in MODES else "error"), float(body.get("delay", 0))

    def port(self, req: dict[str, Any]) -> str:
        name = f"{req.get('container_id', '')}:{req.get('if_name', '')}"
        return os.path.join(self.ports, name.replace("/", "_"))

    def add(self, req: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        cid = str(req.get("container_id", ""))
        ifname = str(req.get("if_name", "eth0"))
        host, failed = self.pod_nic(str(req.get("net_ns", "")), cid, ifname)
        if failed:
            return 500, {"error": f"configure nic failed: {failed}"}
        with open(self.port(req), "w", encoding="utf-8") as f:
            json.dump(req | {"host_nic": host}, f)
        return 200, {"protocol": "IPv4", "address": address(cid), "mac_address": mac(cid),
                     "cidr": CIDR, "gateway": GATEWAY, "routes": None, "mtu": MTU,
                     "nicname": ifname, "dns": {}, "error": ""}

    def delete(self, req: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        netns = str(req.get("net_ns", ""))
        if netns != "":
            host, _ = nic_names(str(req.get("container_id", "")), str(req.get("if_name", "eth0")))
            try:
                os.unlink(self.port(req))
            except FileNotFoundError:
                pass  # del-port --if-exists: a port already gone is success
            self.node(["ip", "link", "del", host])  # the pod's end goes with it; none is success
        return 204, None

    def node(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """A command in the node's network namespace."""
        return subprocess.run([*self._node(), *argv],
                              capture_output=True, text=True, check=False)

    def pod_nic(self, netns: str, cid: str, ifname: str) -> tuple[str, str]:
        """The pod's veth pair, made in the node and its container end moved into the pod's
        netns: the host end's name, and "" when done, else why not (the pair rolled back, as
        rollBackVethPair does). A pod whose netns already has `ifname` (a repeated ADD) keeps
        it."""
        host, peer = nic_names(cid, ifname)
        if not netns or not os.path.exists(netns):
            return host, f"netns {netns!r} not found"
        pod = ["nsenter", f"--net={netns}", "--"]
        if subprocess.run([*pod, "ip", "link", "show", ifname], capture_output=True,
                          check=False).returncode == 0:
            return host, ""
        self.node(["ip", "link", "del", host])  # a pair a killed ADD left behind
        steps = [
            [*self._node(), "ip", "link", "add", host, "mtu", str(MTU), "type", "veth", "peer",
             "name", peer, "mtu", str(MTU)],
            [*self._node(), "ip", "link", "set", host, "up"],
            [*self._node(), "ip", "link", "set", peer, "netns", netns],
            [*pod, "ip", "link", "set", peer, "name", ifname],
            [*pod, "ip", "link", "set", ifname, "address", mac(cid)],
            [*pod, "ip", "addr", "add", f"{address(cid)}/{CIDR.split('/')[1]}", "dev", ifname],
            [*pod, "ip", "link", "set", ifname, "up"],
        ]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                self.node(["ip", "link", "del", host])
                return host, f"{' '.join(step[3:])}: {done.stderr.strip()}"
        return host, ""

    def _node(self) -> list[str]:
        return ["nsenter", f"--net={self.node_netns}", "--"]


def nic_names(container_id: str, ifname: str) -> tuple[str, str]:
    """kube-ovn's generateNicName (pkg/daemon/ovs_linux.go:384-394 at v1.15.3): the host end's
    and the container end's names (15 characters at most, the kernel's limit)."""
    if ifname == "eth0":
        return container_id[:12] + "_h", container_id[:12] + "_c"
    if ifname.startswith("pod") and len(ifname) == 14:  # KubeVirt's pod<hash>: its middle
        ifname = ifname[3:-4]
    stem = container_id[:12 - len(ifname)]
    return f"{stem}_{ifname}_h", f"{stem}_{ifname}_c"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        """Nothing on stderr: the record is the log."""

    def do_POST(self) -> None:
        endpoint = {"/api/v1/add": "add", "/api/v1/del": "del"}.get(self.path)
        length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
        raw = self.rfile.read(length)
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            req = {}
        daemon = self.server.daemon
        line = {"t": time.time(), "path": self.path, "request": req, "pid": os.getpid()}
        _append(daemon.record, line | {"phase": "start"})
        if endpoint is None:
            self._answer(404, {"error": f"no route {self.path}"})
            return
        mode, delay = daemon.mode(endpoint)
        if mode == "hang":
            _append(daemon.record, line | {"phase": "hung"})
            self.server.hung.wait()  # until the process ends: no answer, ever
            return
        if mode == "slow":
            time.sleep(delay)
        status: int
        body: dict[str, Any] | None
        if mode == "error":
            status, body = 500, {"error": f"{endpoint} failed: told to (stand-in error mode)"}
        else:
            status, body = daemon.add(req) if endpoint == "add" else daemon.delete(req)
        _append(daemon.record, line | {"phase": "end", "status": status})
        self._answer(status, body)

    def _answer(self, status: int, body: dict[str, Any] | None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, daemon: Daemon) -> None:
        self.daemon = daemon
        self.hung = threading.Event()
        super().__init__(path, Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, _ = self.socket.accept()
        return conn, ("unix", 0)  # http.server wants a (host, port) client address


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="kube_ovn_daemon")
    p.add_argument("--socket", default=SOCKET)
    p.add_argument("--settings", required=True)
    p.add_argument("--record", required=True)
    p.add_argument("--ports", required=True)
    p.add_argument("--node-netns", required=True, help="the node's network namespace (a path)")
    p.add_argument("--start-after", type=float, default=0.0)
    args = p.parse_args(argv)
    if args.start_after > 0:
        time.sleep(args.start_after)  # "restart": down until then, no socket
    os.makedirs(os.path.dirname(args.socket), exist_ok=True)
    try:
        os.unlink(args.socket)  # a predecessor's socket: start-cniserver.sh:14-18 removes it
    except FileNotFoundError:
        pass
    server = Server(args.socket, Daemon(args.settings, args.record, args.ports,
                                         args.node_netns))
    _append(args.record, {"t": time.time(), "phase": "listening", "pid": os.getpid()})
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
