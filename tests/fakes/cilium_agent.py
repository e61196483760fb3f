"""STAND-IN, for tests only: cilium-agent's local REST API, as the real cilium-cni plugin
(peers/pins.tsv's cilium row) uses it in chained "generic-veth" mode, without BPF, a datapath or
Kubernetes.

The real agent needs BPF, a kernel datapath and the cluster's API; no installable part here can be
it. The real plugin is run against this process; what it copies from cilium v1.19.1, and nothing
more (paths in github.com/cilium/cilium at v1.19.1):

- Where it listens: HTTP over the unix socket /var/run/cilium/cilium.sock (pkg/defaults/
  defaults.go:54,79), API base path /v1 (api/v1/client/cilium_api_client.go:34). The plugin reads
  the path from CILIUM_SOCK when set (pkg/client/client.go:34-42).
- Start: the agent makes the socket's dir and removes an old socket first (daemon/cmd/
  daemon_main.go:1006-1021), so while it boots the dir is there and the socket is not. Before its
  API serves it takes the deletion queue's lock exclusively and replays every queued
  `*.delete` file (a JSON EndpointBatchDeleteRequest, or a legacy bare endpoint ID): it deletes
  the endpoints of that container ID and removes the file, whatever the outcome; it drops the
  lock once the API serves (pkg/endpoint/api/endpoint_deletion_queue.go:37-64,99-131,135-228).
  Queue: /var/run/cilium/deleteQueue, its lock file `lockfile` in it (defaults.go:98,102).
- GET /v1/config: 200 with a DaemonConfiguration; the plugin polls it every 500 ms to decide
  the agent is up (client.go:72-108) and refuses an answer without `status` (plugins/cilium-cni/
  cmd/cmd.go:159-170). The status holds what the cozystack v1.2.0 kubeovn-cilium values set
  (native routing, IPAM "kubernetes", no masquerade; api/v1/models/daemon_configuration_status.go).
- PUT /v1/endpoint/cilium-local:0 (pkg/client/endpoint.go:44-52; pkg/endpoint/id/id.go:83): the
  EndpointChangeRequest generic-veth builds from the pod's first veth and its host peer
  (plugins/cilium-cni/chaining/generic-veth/generic-veth.go:30-266). 201 with the Endpoint
  (pkg/endpoint/api/endpoint_api_handler.go:195-224); 400 when an endpoint of that CNI attachment
  (container ID and the pod's interface name) or that IP already exists (pkg/endpoint/api/
  endpoint_api_manager.go:141-175). The answer keeps the pod's MAC: a different one would make
  the plugin rewrite the pod's interface (generic-veth.go:245-262). The real agent also builds the
  endpoint's BPF programs before it answers (SyncBuildEndpoint); the stand-in answers at once.
- DELETE /v1/endpoint with an EndpointBatchDeleteRequest {"container-id"}: 400 without one, 404
  "endpoints not found" when no endpoint has it, else 200 (endpoint_api_handler.go:134-171).
  The plugin counts any answer but 503 as done: 404 is a successful DEL (plugins/cilium-cni/lib/
  deletion_queue.go:208-220, generic-veth.go:268-282).
- GET /v1/endpoint/cni-attachment-id:<container ID>:<ifname>/healthz (CHECK; endpoint/id/
  id.go:106-112): 200 with an EndpointHealth, 404 for no such endpoint (endpoint_api_handler.go:
  467-487). GET /v1/healthz (STATUS): 200. (A conflist at cniVersion 0.3.1, as cozystack's is,
  gets neither CHECK nor STATUS from a runtime.)
- Errors: a JSON string body (pkg/api/apierror.go:53-66).
- The CNI config: with --write-cni-conf the stand-in writes COZYSTACK_CONFLIST there once it
  serves, as the agent does with cozystack's `cni.customConf` and `cni.configMap`: the
  ConfigMap's text byte for byte, mode 0600, by rename, left alone when equal, never removed on
  stop (daemon/cmd/cni/config.go:295-365; cozystack v1.2.0 packages/system/cilium: templates/
  cni.yaml, values-kubeovn.yaml, charts/cilium/templates/cilium-configmap.yaml:970-975,
  cni.uninstall false in charts/cilium/values.yaml:748).

Modes are its process's life, as the agent's are:
    up      running: answers as above
    down    stopped with SIGTERM: the socket goes (a Go unix listener removes its path on close),
            the runtime dir and the queue stay (a hostPath: cozystack v1.2.0's chart,
            charts/cilium/templates/cilium-agent/daemonset.yaml:877-880)
    stale   killed with SIGKILL: the socket file stays and refuses connections
    booting started with --start-after SECONDS: the old socket is removed at once, the API binds
            only then (after replaying the queue)
What the real plugin does in each is its own code (lib/deletion_queue.go, client.go): the
stand-in only has to be, or not be, there.

Every request is appended to a JSON-lines record (method, path, body, status), with a
`listening` line when the API binds and a `replayed` line per queue file. Endpoints are kept one
JSON file per endpoint in --state, so they outlive a restart as the agent's restored endpoints do.
Standard library only: it runs as `python3 -I cilium_agent.py ...`, inside a node's mount
namespace when the plugin's fixed queue path must not be the host's.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import socket
import socketserver
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import Any

RUNTIME = "/var/run/cilium"  # pkg/defaults/defaults.go:54
SOCKET = RUNTIME + "/cilium.sock"  # defaults.go:79
QUEUE = RUNTIME + "/deleteQueue"  # defaults.go:98
LOCKFILE = "lockfile"  # defaults.go:102
MAX_BODY = 1 << 20

# What cilium-agent writes to 05-cilium.conflist on a cozystack v1.2.0 kubeovn-cilium node: the
# `cni-config` of packages/system/cilium/templates/cni.yaml as YAML's `|-` gives it (no final
# newline).
COZYSTACK_CONFLIST = """{
  "name": "generic-veth",
  "cniVersion": "0.3.1",
  "plugins": [
    {
      "type": "kube-ovn",
      "server_socket": "/run/openvswitch/kube-ovn-daemon.sock",
      "ipam": {
          "type": "kube-ovn",
          "server_socket": "/run/openvswitch/kube-ovn-daemon.sock"
      }
    },
    {
      "type": "portmap",
      "snat": true,
      "capabilities": {"portMappings": true}
    },
    {
      "type": "cilium-cni"
    }
  ]
}"""

# GET /v1/config's status, as far as cozystack's values make it (values.yaml, values-kubeovn.yaml).
CONFIG_STATUS = {
    "addressing": {"ipv4": {"enabled": True}, "ipv6": {"enabled": False}},
    "datapathMode": "veth",
    "ipam-mode": "kubernetes",
    "masquerade": False,
    "routeMTU": 1500,
    "deviceMTU": 1500,
    "enableRouteMTUForCNIChaining": False,
}


def _append(path: str, entry: dict[str, Any]) -> None:
    """One JSON line, one write on an O_APPEND descriptor (lines never interleave)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
    finally:
        os.close(fd)


class Agent:
    """The endpoints (one file each in `state`), the record, and the lock they share."""

    def __init__(self, state: str, record: str) -> None:
        self.state, self.record = state, record
        self.lock = threading.Lock()
        os.makedirs(state, exist_ok=True)

    def endpoints(self) -> dict[int, dict[str, Any]]:
        found = {}
        for name in os.listdir(self.state):
            if name.endswith(".json"):
                with open(os.path.join(self.state, name), encoding="utf-8") as f:
                    found[int(name[:-5])] = json.load(f)
        return found

    def create(self, req: dict[str, Any]) -> tuple[int, Any]:
        cid = str(req.get("container-id") or "")
        ifname = str(req.get("container-interface-name") or "")
        ips = addresses(req)
        with self.lock:
            have = self.endpoints()
            for ep in have.values():
                if (ep["container-id"], ep["container-interface-name"]) == (cid, ifname):
                    return 400, f"endpoint for CNI attachment ID {attachment(cid, ifname)} " \
                                "already exists"
                taken = ips & addresses(ep)
                if taken:
                    return 400, f"IP {sorted(taken)[0]} is already in use"
            number = max(have, default=0) + 1
            with open(os.path.join(self.state, f"{number}.json"), "w", encoding="utf-8") as f:
                json.dump(req, f)
        return 201, model(number, req)

    def delete(self, cid: str) -> int:
        """Remove every endpoint of the container; how many there were."""
        with self.lock:
            gone = [n for n, ep in self.endpoints().items() if ep.get("container-id") == cid]
            for number in gone:
                os.unlink(os.path.join(self.state, f"{number}.json"))
        return len(gone)

    def find(self, endpoint_id: str) -> tuple[int, dict[str, Any]] | None:
        """The endpoint an ID names: cilium-local:N, N, or cni-attachment-id:C[:IF]."""
        with self.lock:
            have = self.endpoints()
        if endpoint_id.startswith("cni-attachment-id:"):
            cid, _, ifname = endpoint_id.removeprefix("cni-attachment-id:").partition(":")
            for number, ep in have.items():
                if ep.get("container-id") == cid and ifname in (
                        "", ep.get("container-interface-name")):
                    return number, ep
            return None
        number_text = endpoint_id.removeprefix("cilium-local:")
        if number_text.isdigit() and int(number_text) in have:
            return int(number_text), have[int(number_text)]
        return None


def addresses(req: dict[str, Any]) -> set[str]:
    pair = req.get("addressing") or {}
    return {str(pair[k]) for k in ("ipv4", "ipv6") if pair.get(k)}


def attachment(cid: str, ifname: str) -> str:
    return f"{cid}:{ifname}" if ifname else cid  # pkg/endpoint/id/id.go:106-112


def model(number: int, req: dict[str, Any]) -> dict[str, Any]:
    """The models.Endpoint the agent answers, from what the plugin sent."""
    addressing = req.get("addressing") or {}
    return {
        "id": number,
        "status": {
            "state": "waiting-for-identity",
            "external-identifiers": {
                "container-id": req.get("container-id"),
                "cni-attachment-id": attachment(str(req.get("container-id")),
                                                str(req.get("container-interface-name") or "")),
                "k8s-namespace": req.get("k8s-namespace"),
                "k8s-pod-name": req.get("k8s-pod-name"),
            },
            "networking": {
                "addressing": [{k: v for k, v in addressing.items() if v}],
                "mac": req.get("mac"),
                "host-mac": req.get("host-mac"),
                "interface-name": req.get("interface-name"),
                "interface-index": req.get("interface-index"),
            },
        },
    }


def replay_queue(queue: str, agent: Agent) -> int:
    """The agent's start: take the queue's lock exclusively, replay and remove every queued
    deletion; return the lock's descriptor (dropped once the API serves)."""
    os.makedirs(queue, mode=0o755, exist_ok=True)
    fd = os.open(os.path.join(queue, LOCKFILE), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.lockf(fd, fcntl.LOCK_EX)  # conflicts with the plugin's OFD read lock
    for name in sorted(os.listdir(queue)):
        if not name.endswith(".delete"):
            continue
        path = os.path.join(queue, name)
        with open(path, "rb") as f:
            raw = f.read()
        try:
            cid = str(json.loads(raw).get("container-id") or "")
            gone = agent.delete(cid) if cid else 0
        except (ValueError, AttributeError):  # the legacy form: a bare endpoint ID
            found = agent.find(raw.decode(errors="replace"))
            gone = agent.delete(found[1]["container-id"]) if found else 0
        os.unlink(path)
        _append(agent.record, {"t": time.time(), "phase": "replayed", "file": name,
                               "deleted": gone})
    return fd


def write_cni_conf(dest: str, contents: str) -> None:
    """write-cni-conf-when-ready: the same bytes are left alone, others replaced by rename."""
    data = contents.encode()
    with contextlib.suppress(OSError), open(dest, "rb") as f:
        if f.read() == data:
            return
    tmp = f"{dest}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, dest)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        """Nothing on stderr: the record is the log."""

    def _body(self) -> Any:
        length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
        raw = self.rfile.read(length)
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def _route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        agent = self.server.agent
        if (method, path) == ("GET", "/v1/config"):
            return 200, {"spec": {"options": {}}, "status": CONFIG_STATUS}
        if (method, path) == ("GET", "/v1/healthz"):
            return 200, {"cilium": {"state": "Ok", "msg": "stand-in"}}
        if (method, path) == ("DELETE", "/v1/endpoint"):
            cid = str((body or {}).get("container-id") or "") if isinstance(body, dict) else ""
            if not cid:
                return 400, "invalid container id"
            return (200, None) if agent.delete(cid) else (404, "endpoints not found")
        if path.startswith("/v1/endpoint/"):
            rest = urllib.parse.unquote(path[len("/v1/endpoint/"):])
            if method == "PUT" and "/" not in rest:
                if not isinstance(body, dict) or not body.get("container-id"):
                    return 400, "invalid endpoint change request"
                return agent.create(body)
            if method == "GET" and rest.endswith("/healthz"):
                found = agent.find(rest[: -len("/healthz")])
                if found is None:
                    return 404, None
                return 200, {"bpf": "OK", "policy": "OK", "connected": True,
                             "overallHealth": "OK"}
        return 404, f"no route {method} {path}"

    def _serve(self, method: str) -> None:
        body = self._body()
        path = urllib.parse.urlsplit(self.path).path
        status, answer = self._route(method, path, body)
        _append(self.server.agent.record, {"t": time.time(), "method": method, "path": path,
                                           "request": body, "status": status})
        data = b"" if answer is None else json.dumps(answer).encode()
        self.send_response(status)
        if answer is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, agent: Agent) -> None:
        self.agent = agent
        super().__init__(path, Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, _ = self.socket.accept()
        return conn, ("unix", 0)  # http.server wants a (host, port) client address

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Into the record, not stderr (a client gone mid-answer, say)."""
        _append(self.agent.record, {"t": time.time(), "phase": "error",
                                    "error": repr(sys.exc_info()[1])})


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="cilium_agent")
    p.add_argument("--socket", default=SOCKET)
    p.add_argument("--queue", default=QUEUE)
    p.add_argument("--state", required=True)
    p.add_argument("--record", required=True)
    p.add_argument("--start-after", type=float, default=0.0)
    p.add_argument("--write-cni-conf", default="")
    args = p.parse_args(argv)
    os.makedirs(os.path.dirname(args.socket), mode=0o750, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(args.socket)  # daemon_main.go:1016, before anything else
    if args.start_after > 0:
        time.sleep(args.start_after)  # booting: the dir is there, the socket is not
    agent = Agent(args.state, args.record)
    lock = replay_queue(args.queue, agent)
    server = Server(args.socket, agent)

    def stop(signum: int, frame: object) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(args.socket)  # as a Go unix listener's Close does
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    _append(args.record, {"t": time.time(), "phase": "listening", "pid": os.getpid()})
    os.close(lock)  # unlockAfterAPIServer: the queue's lock goes once the API serves
    if args.write_cni_conf:
        write_cni_conf(args.write_cni_conf, COZYSTACK_CONFLIST)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
