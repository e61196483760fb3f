"""STAND-IN, for tests only: kube-ovn's CNI daemon (kube-ovn-cni's cniserver), as the real
kube-ovn CNI plugin (peers/pins.tsv's kube-ovn row) talks to it, without OVS or OVN.

The real daemon needs Open vSwitch, an OVN database and kube-ovn's controller and CRDs; no
installable part here can be it. What this process copies from kube-ovn v1.15.3, and nothing more:

- Where it listens: an HTTP server on the unix socket /run/openvswitch/kube-ovn-daemon.sock
  (dist/images/start-cniserver.sh:4; the conflist's `server_socket`), run inside the node, so it
  goes with the node's /run at a power-off as its DaemonSet pod's socket does.
- The routes: POST /api/v1/add and POST /api/v1/del, JSON bodies (pkg/daemon/server.go:43-55),
  the request being request.CniRequest (pkg/request/cniserver.go:23-42: cni_type, pod_name,
  pod_namespace, container_id, net_ns, if_name, provider, ...).
- add, in handleAdd's order (pkg/daemon/handler.go:62-433), each wait in kube-ovn's seconds
  times the settings' `scale` (1 in a scenario; a unit test shrinks it):
  1. the pod from the daemon's informer (here: the chain's API server, --api, the pods of
     --node): not there, 500 "get pod ... failed" at once; then up to 20 looks, 1 s apart, for
     the controller's `ovn.kubernetes.io/allocated` (and `routed`) annotations, then 500 "no
     address allocated to pod ..." (handler.go:97-209). Without --api the pod is taken as
     allocated.
  2. the veth pair and the OVS port (ovs_linux.go:78-150); with OVSDB down, add-port fails
     after ovs-vsctl's --timeout=30 (pkg/ovs/ovs-vsctl.go:58-100) and the pair is rolled back.
  3. the `ovn-installed` wait: polled every 0.5 s for 30 s, then 500 "ovs interface ... is not
     ready after 30s" with the port and the pair rolled back (ovs_linux.go:206-233 and the
     deferred rollbacks at 84-92, 141-148). Here ovn-controller sets it `ovn_installed_after`
     seconds after the port is made.
  4. the pod's end configured, then the gateway check: one ARP a second, up to 200
     (gatewayCheckMaxRetry, ovs.go:16; util.ArpResolve), while a goroutine looks every 5 s
     whether the pod is gone or being deleted and cancels the check if so (ovs_linux.go:565-603);
     either failure is a 500 with everything rolled back. Here the gateway answers
     `gateway_after` seconds into the check (null: never).
  Then 200 with a request.CniResponse (pkg/request/cniserver.go:44-55; pkg/daemon/handler.go:
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
  link not found is success): the daemon's DEL is idempotent. With OVSDB down, del-port fails
  after 30 s and the DEL answers 500 at that first failure (handler.go:528-541).
- gcInterfaces, at its start and every 60 s after (wait.Until, pkg/daemon/controller.go:727-790,
  866): OVS's interfaces of pods whose link is not up (pkg/ovs/ovs-vsctl.go:259-295
  ListInterfacePodMap: `link_state!=up`) lose their port when the link is gone ("No such
  device") or their pod is not in the informer's cache (CleanInterface, ovs-vsctl.go:297: the
  port only; the kernel link is not deleted). Each pass is a `gc` line in the record.
- Failures: 500 with a CniResponse whose `error` says why (handler.go:533-536). The plugin's client
  (pkg/request/cniserver.go:58-81) turns any status but 200 (add) or 204 (del), and any transport
  error, into CNI error code 11 "RPC failed" (cmd/cni/cni.go:75, 197).

Modes (its settings file, read for every request, so a test switches them between calls; `add`
and `del` each take one):
    healthy     answer as above
    ovsdb-down  every ovs-vsctl waits its --timeout=30 and fails: add and del answer 500 after
                30 s (kube-ovn's "unhealthy OVSDB": it never hangs)
    hang        accept and read the request, never answer. No kube-ovn code path does this (its
                ovs-vsctl calls are bounded, above): a wedged process, kept for scenarios that
                ask what an unanswered DEL does to a caller without a deadline
    slow        answer as healthy after `delay` seconds
    error       answer 500 at once
Other settings: `ovn_installed_after` (seconds, default 0), `gateway_after` (seconds or null,
default 0), `scale` (default 1). "down" is no process and no socket (the chain stops it and
removes the socket, as start-cniserver.sh:8-12 does on exit); "restart" is down for a while,
then healthy: started with --start-after SECONDS, it binds its socket only then.

Every request is appended to a JSON-lines record: a `start` line with the path and the request
body when it arrives, an `end` line with the status when it answers (none for a hung one), so a
test counts the DELs that reached the daemon; a `look` line per look for the pod's annotations,
`port` lines when a port is made or removed and why, a `gc` line per GC pass. Standard library
only: it runs as `python3 -I kube_ovn_daemon.py ...` inside the node's mount namespace.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler
from typing import Any

SOCKET = "/run/openvswitch/kube-ovn-daemon.sock"  # dist/images/start-cniserver.sh:4
MODES = ("healthy", "ovsdb-down", "hang", "slow", "error")
CIDR = "10.16.0.0/16"  # kube-ovn's default pod CIDR (ovn-default)
GATEWAY = "10.16.0.1"
MTU = 1400  # kube-ovn's default MTU on a Geneve overlay: 1500 less the tunnel's 100
MAX_BODY = 1 << 20
# kube-ovn v1.15.3's numbers, in its seconds (the header cites each)
ANNOTATION_LOOKS = 20  # handler.go:97, 1 s apart
OVS_VSCTL_TIMEOUT = 30.0  # pkg/ovs/ovs-vsctl.go:80 --timeout=30
OVN_INSTALLED_TIMEOUT = 30.0  # ovs_linux.go:212
OVN_INSTALLED_POLL = 0.5  # ovs_linux.go:233
GATEWAY_TRIES = 200  # ovs.go:16 gatewayCheckMaxRetry, one ARP a second
POD_CHECK = 5.0  # ovs_linux.go:574
GC_PERIOD = 60.0  # controller.go:866
ALLOCATED = "ovn.kubernetes.io/allocated"  # util.AllocatedAnnotationTemplate, provider ovn
ROUTED = "ovn.kubernetes.io/routed"
IP_ADDRESS = "ovn.kubernetes.io/ip_address"


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


def nic_names(container_id: str, ifname: str) -> tuple[str, str]:
    """kube-ovn's generateNicName (pkg/daemon/ovs_linux.go:384-394 at v1.15.3): the host end's
    and the container end's names (15 characters at most, the kernel's limit)."""
    if ifname == "eth0":
        return container_id[:12] + "_h", container_id[:12] + "_c"
    if ifname.startswith("pod") and len(ifname) == 14:  # KubeVirt's pod<hash>: its middle
        ifname = ifname[3:-4]
    stem = container_id[:12 - len(ifname)]
    return f"{stem}_{ifname}_h", f"{stem}_{ifname}_c"


class DaemonError(Exception):
    """A 500 with this error text."""


class Pods:
    """The daemon's informer, reduced to what it asks: this node's pods, read from the chain's
    API server at each question (none given: every pod is there and allocated)."""

    def __init__(self, url: str, ca: str, node: str) -> None:
        self.url, self.node = url, node
        self.context = ssl.create_default_context(cafile=ca) if ca else None

    def listed(self) -> dict[str, dict[str, Any]] | None:
        """namespace/name -> pod; None when the server did not answer."""
        if not self.url:
            return None
        query = urllib.parse.urlencode({"fieldSelector": f"spec.nodeName={self.node}"})
        # An https URL, checked in main: the chain's own API server.
        req = urllib.request.Request(f"{self.url}/api/v1/pods?{query}",  # noqa: S310
                                     headers={"Authorization": "Bearer stand-in"})
        try:
            with urllib.request.urlopen(req, timeout=10,  # noqa: S310
                                        context=self.context) as resp:
                items = json.load(resp).get("items") or []
        except (OSError, ValueError):
            return None
        return {f"{i['metadata']['namespace']}/{i['metadata']['name']}": i for i in items}

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        if not self.url:
            return {"metadata": {"annotations": {ALLOCATED: "true", ROUTED: "true"}}}
        pods = self.listed()
        return None if pods is None else pods.get(f"{namespace}/{name}")


class Daemon:
    """The daemon's state: its settings file, its record, its ports and the node's netns."""

    def __init__(self, settings: str, record: str, ports: str, node_netns: str,
                 pods: Pods) -> None:
        self.settings, self.record, self.ports = settings, record, ports
        self.node_netns, self.pods = node_netns, pods
        self.lock = threading.Lock()  # the ports' files, between handlers and the GC
        os.makedirs(ports, exist_ok=True)

    def conf(self) -> dict[str, Any]:
        try:
            with open(self.settings, encoding="utf-8") as f:
                body = json.load(f)
        except (OSError, ValueError):
            body = {}
        return body if isinstance(body, dict) else {}

    def mode(self, endpoint: str) -> tuple[str, float]:
        body = self.conf()
        mode = str(body.get(endpoint, "healthy"))
        return (mode if mode in MODES else "error"), float(body.get("delay", 0))

    def sleep(self, seconds: float) -> None:
        """kube-ovn's seconds, scaled."""
        time.sleep(seconds * float(self.conf().get("scale", 1)))

    def port(self, req: dict[str, Any]) -> str:
        name = f"{req.get('container_id', '')}:{req.get('if_name', '')}"
        return os.path.join(self.ports, name.replace("/", "_"))

    def note(self, event: str, port: str, why: str) -> None:
        _append(self.record, {"t": time.time(), "phase": "port", "event": event,
                              "port": os.path.basename(port), "why": why})

    # --- add ------------------------------------------------------------------------------------

    def add(self, req: dict[str, Any], mode: str) -> tuple[int, dict[str, Any] | None]:
        cid = str(req.get("container_id", ""))
        ifname = str(req.get("if_name", "eth0")) or "eth0"
        try:
            ip = self.wait_allocated(req) or address(cid)
            self.configure(req, cid, ifname, ip, mode)
        except DaemonError as exc:
            return 500, {"error": str(exc)}
        return 200, {"protocol": "IPv4", "address": ip, "mac_address": mac(cid),
                     "cidr": CIDR, "gateway": GATEWAY, "routes": None, "mtu": MTU,
                     "nicname": ifname, "dns": {}, "error": ""}

    def wait_allocated(self, req: dict[str, Any]) -> str:
        """The controller's annotations, looked for 20 times 1 s apart: the pod's address."""
        namespace, name = str(req.get("pod_namespace", "")), str(req.get("pod_name", ""))
        for _ in range(ANNOTATION_LOOKS):
            pod = self.pods.get(namespace, name)
            _append(self.record, {"t": time.time(), "phase": "look", "pod": f"{namespace}/{name}",
                                  "found": pod is not None})
            if pod is None:
                raise DaemonError(f"get pod {namespace}/{name} failed pods \"{name}\" not found")
            notes = pod["metadata"].get("annotations") or {}
            if notes.get(ALLOCATED) == "true" and notes.get(ROUTED) == "true":
                return str(notes.get(IP_ADDRESS, ""))
            self.sleep(1)
        raise DaemonError(f"no address allocated to pod {namespace}/{name} provider ovn, "
                          "please see kube-ovn-controller logs to find errors")

    def configure(self, req: dict[str, Any], cid: str, ifname: str, ip: str,
                  mode: str) -> None:
        """configureNic: the pair, the port, ovn-installed, the pod's end, the gateway check;
        whatever fails rolls back the port and the pair."""
        netns = str(req.get("net_ns", ""))
        host, peer = nic_names(cid, ifname)
        if not netns or not os.path.exists(netns):
            raise DaemonError(f"configure nic failed: netns {netns!r} not found")
        pod = ["nsenter", f"--net={netns}", "--"]
        if subprocess.run([*pod, "ip", "link", "show", ifname], capture_output=True,
                          check=False).returncode == 0:
            return  # a repeated ADD: the pod has its interface
        self.node(["ip", "link", "del", host])  # a pair a killed ADD left behind
        self.run([*self._node(), "ip", "link", "add", host, "mtu", str(MTU), "type", "veth",
                  "peer", "name", peer, "mtu", str(MTU)], host)
        path = self.port(req)
        try:
            self.add_port(req, path, host, mode)
            self.wait_ovn_installed(host)
            self.run([*self._node(), "ip", "link", "set", host, "up"], host)
            self.run([*self._node(), "ip", "link", "set", peer, "netns", netns], host)
            for step in (["ip", "link", "set", peer, "name", ifname],
                         ["ip", "link", "set", ifname, "address", mac(cid)],
                         ["ip", "addr", "add", f"{ip}/{CIDR.split('/')[1]}", "dev", ifname],
                         ["ip", "link", "set", ifname, "up"]):
                self.run([*pod, *step], host)
            self.check_gateway(req, ip, ifname)
        except DaemonError:
            self.remove(path, "rolled back")
            self.node(["ip", "link", "del", host])  # rollBackVethPair
            raise

    def add_port(self, req: dict[str, Any], path: str, host: str, mode: str) -> None:
        if mode == "ovsdb-down":
            self.sleep(OVS_VSCTL_TIMEOUT)
            raise DaemonError(f"add nic to ovs failed: ovs-vsctl --timeout=30 add-port br-int "
                              f"{host}: timed out")
        with self.lock, open(path, "w", encoding="utf-8") as f:
            json.dump(req | {"host_nic": host, "made": time.time(),
                             "netns_ino": os.stat(str(req.get("net_ns", ""))).st_ino}, f)
        self.note("made", path, "add")

    def wait_ovn_installed(self, host: str) -> None:
        after = float(self.conf().get("ovn_installed_after", 0))
        waited = 0.0
        while waited < after:
            if waited >= OVN_INSTALLED_TIMEOUT:
                raise DaemonError(f"ovs interface {host} is not ready after 30s")
            self.sleep(OVN_INSTALLED_POLL)
            waited += OVN_INSTALLED_POLL

    def check_gateway(self, req: dict[str, Any], ip: str, ifname: str) -> None:
        """One ARP a second until the gateway answers, 200 at most; the pod looked up every 5 s
        and the check cancelled once it is gone."""
        after = self.conf().get("gateway_after", 0)
        namespace, name = str(req.get("pod_namespace", "")), str(req.get("pod_name", ""))
        for sent in range(GATEWAY_TRIES):
            if after is not None and sent >= float(after):
                return
            if sent and sent % int(POD_CHECK) == 0 and self.pods.get(namespace, name) is None:
                raise DaemonError(f"network {ip}/16 with gateway {GATEWAY} is not ready for "
                                  f"interface {ifname} after {sent} checks: gateway check "
                                  "canceled")
            self.sleep(1)
        raise DaemonError(f"network {ip}/16 with gateway {GATEWAY} is not ready for interface "
                          f"{ifname} after {GATEWAY_TRIES} checks")

    # --- del ------------------------------------------------------------------------------------

    def delete(self, req: dict[str, Any], mode: str) -> tuple[int, dict[str, Any] | None]:
        if str(req.get("net_ns", "")) == "":
            return 204, None
        host, _ = nic_names(str(req.get("container_id", "")),
                            str(req.get("if_name", "eth0")) or "eth0")
        if mode == "ovsdb-down":
            self.sleep(OVS_VSCTL_TIMEOUT)
            return 500, {"error": "del nic failed failed to delete ovs port: ovs-vsctl "
                                  f"--timeout=30 --if-exists --with-iface del-port br-int {host}: "
                                  "timed out"}
        self.remove(self.port(req), "del")  # del-port --if-exists: gone already is success
        self.node(["ip", "link", "del", host])  # the pod's end goes with it; none is success
        return 204, None

    def remove(self, path: str, why: str) -> None:
        with self.lock:
            try:
                os.unlink(path)
            except FileNotFoundError:
                return
        self.note("removed", path, why)

    # --- gcInterfaces ---------------------------------------------------------------------------

    def gc(self) -> None:
        """One pass: ports whose link is not up, removed when the link is gone or the pod is
        not in the cache."""
        pods = self.pods.listed()
        _append(self.record, {"t": time.time(), "phase": "gc"})
        for name in sorted(os.listdir(self.ports)):
            path = os.path.join(self.ports, name)
            try:
                with open(path, encoding="utf-8") as f:
                    req = json.load(f)
            except (OSError, ValueError):
                continue
            state = self.link_state(str(req.get("host_nic", "")))
            if state == "gone":
                self.remove(path, "gc: no such device")
                continue
            key = f"{req.get('pod_namespace', '')}/{req.get('pod_name', '')}"
            if state == "down" and pods is not None and key not in pods:
                self.remove(path, "gc: pod not found")
                continue
            _append(self.record, {"t": time.time(), "phase": "port", "event": "kept",
                                  "port": name, "why": f"gc: link {state}",
                                  "cache": pods is not None})

    def link_state(self, host: str) -> str:
        shown = self.node(["ip", "-j", "link", "show", "dev", host])
        if shown.returncode != 0 or not host:
            return "gone"
        try:
            links = json.loads(shown.stdout)
        except ValueError:
            return "gone"
        return "up" if links and "UP" in links[0].get("flags", []) and \
            links[0].get("operstate") != "DOWN" else "down"

    def gc_forever(self) -> None:
        while True:
            self.gc()
            self.sleep(GC_PERIOD)

    # --- the node -------------------------------------------------------------------------------

    def _node(self) -> list[str]:
        return ["nsenter", f"--net={self.node_netns}", "--"]

    def node(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """A command in the node's network namespace."""
        return subprocess.run([*self._node(), *argv], capture_output=True, text=True,
                              check=False)

    @staticmethod
    def run(argv: list[str], host: str) -> None:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise DaemonError(f"configure nic failed: {' '.join(argv[3:])} ({host}): "
                         f"{done.stderr.strip()}")


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
        elif endpoint == "add":
            status, body = daemon.add(req, mode)
        else:
            status, body = daemon.delete(req, mode)
        _append(daemon.record, line | {"phase": "end", "status": status,
                                       "error": (body or {}).get("error", "")})
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
    p.add_argument("--api", default="", help="the API server's URL (none: no pod lookups)")
    p.add_argument("--api-ca", default="", help="its CA certificate")
    p.add_argument("--node", default="", help="this node's name (its pods are the cache)")
    p.add_argument("--start-after", type=float, default=0.0)
    args = p.parse_args(argv)
    if args.api and not args.api.startswith("https://"):
        p.error("--api must be an https URL")
    if args.start_after > 0:
        time.sleep(args.start_after)  # "restart": down until then, no socket
    os.makedirs(os.path.dirname(args.socket), exist_ok=True)
    try:
        os.unlink(args.socket)  # a predecessor's socket: start-cniserver.sh:14-18 removes it
    except FileNotFoundError:
        pass
    daemon = Daemon(args.settings, args.record, args.ports, args.node_netns,
                    Pods(args.api, args.api_ca, args.node))
    server = Server(args.socket, daemon)
    threading.Thread(target=daemon.gc_forever, name="gcInterfaces", daemon=True).start()
    _append(args.record, {"t": time.time(), "phase": "listening", "pid": os.getpid()})
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
