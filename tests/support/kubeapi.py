"""FAKE KUBERNETES API SERVER, for tests only: what multus's client and multus-daemon's informers
use, over HTTPS on loopback at an ephemeral port, in the test's own process (Python stdlib).

It stands for a kube-apiserver (and etcd), which the multus chains need only for pods and
network-attachment-definitions; a real one would add minutes and two more peers to CI for objects
this small. It serves, as JSON (client-go asks for protobuf or JSON and decodes what it gets):

- pods: get (/api/v1/namespaces/NS/pods/NAME), list and watch (all namespaces, with the
  `spec.nodeName=` field selector the daemon's informer sends, and the watch-list form client-go
  0.35 uses by default: sendInitialEvents=true, ended by a bookmark annotated
  k8s.io/initial-events-end), and the status update multus makes after ADD (PUT .../status: the
  pod is returned unchanged: the network-status annotation is not kept);
- network-attachment-definitions (k8s.cni.cncf.io/v1): get, list, watch the same way;
- events (POST/PATCH): accepted and dropped.

It does not serve: discovery, authentication or authorization (any token is accepted),
admission, other resources (404), protobuf (never answered with it), resource versions older
than its start (a watch from an old version gets the events since then), or watch timeouts
longer than the test. Every request is counted by method and resource (`count`), so a test can
see how often multus asked for what.

The TLS certificate is self-signed for IP 127.0.0.1 (made with openssl(1), Debian's `openssl`);
`kubeconfig()` writes a kubeconfig that trusts it (multus thin), `service_account()` the
in-cluster files (multus-daemon reads /var/run/secrets/kubernetes.io/serviceaccount/ and
KUBERNETES_SERVICE_HOST/PORT).
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import threading
import uuid
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

NAD_GROUP = "k8s.cni.cncf.io/v1"
POLL = 0.2  # how often a watch stream looks for the server stopping (seconds)
TOKEN = "dgmu-fake-token"  # noqa: S105 - a fake server's fake token, checked by nobody


@dataclass
class Event:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    resource: str  # "pods" or "network-attachment-definitions"
    obj: dict[str, Any]


@dataclass
class Store:
    """Objects by (resource, namespace, name), and every change as an event with its version."""

    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    rv: int = 1
    changed: threading.Condition = field(default_factory=threading.Condition)
    stopping: bool = False

    def put(self, resource: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        key = (resource, meta["namespace"], meta["name"])
        with self.changed:
            self.rv += 1
            meta["resourceVersion"] = str(self.rv)
            kind = "MODIFIED" if key in self.objects else "ADDED"
            self.objects[key] = obj
            self.events.append(Event(self.rv, kind, resource, obj))
            self.changed.notify_all()

    def delete(self, resource: str, namespace: str, name: str) -> bool:
        with self.changed:
            obj = self.objects.pop((resource, namespace, name), None)
            if obj is None:
                return False
            self.rv += 1
            gone = json.loads(json.dumps(obj))
            gone["metadata"]["resourceVersion"] = str(self.rv)
            self.events.append(Event(self.rv, "DELETED", resource, gone))
            self.changed.notify_all()
            return True

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.changed:
            return self.objects.get((resource, namespace, name))

    def listing(self, resource: str, match: Any) -> tuple[int, list[dict[str, Any]]]:
        with self.changed:
            items = [o for (r, _, _), o in sorted(self.objects.items()) if r == resource
                     and match(o)]
            return self.rv, items


def _node_selector(query: dict[str, list[str]]) -> Any:
    """The one field selector multus sends (spec.nodeName=NODE); anything else matches all."""
    wanted = None
    for term in ",".join(query.get("fieldSelector", [])).split(","):
        key, _, value = term.partition("=")
        if key == "spec.nodeName":
            wanted = value
    return lambda o: wanted is None or o.get("spec", {}).get("nodeName") == wanted


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return  # the counts are the record; stderr stays quiet

    # -- plumbing --------------------------------------------------------------------------------
    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _status(self, code: int, reason: str, message: str) -> None:
        self._send(code, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Failure", "message": message, "reason": reason,
                          "code": code})

    def _route(self) -> tuple[str, str, str, str, dict[str, list[str]]]:
        """(resource, namespace, name, sub) of the path, and its query."""
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        segs = [s for s in parts.path.split("/") if s]
        if segs[:2] == ["api", "v1"]:
            rest = segs[2:]
        elif segs[:3] == ["apis", "k8s.cni.cncf.io", "v1"]:
            rest = segs[3:]
        else:
            return "", "", "", "", query
        namespace = ""
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        resource = rest[0] if rest else ""
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        return resource, namespace, name, sub, query

    def _body(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)  # protobuf or JSON: dropped either way

    # -- verbs -----------------------------------------------------------------------------------
    def do_GET(self) -> None:
        resource, namespace, name, _, query = self._route()
        self.server.count(self.command, resource, "watch" in query and query["watch"] == ["true"])
        if resource not in ("pods", "network-attachment-definitions"):
            self._status(404, "NotFound", f"{self.path} is not served by the fake API")
            return
        if name:
            obj = self.server.store.get(resource, namespace, name)
            if obj is None:
                self._status(404, "NotFound", f'{resource} "{name}" not found')
            else:
                self._send(200, obj)
            return
        match = _node_selector(query)
        if query.get("watch") == ["true"]:
            self._watch(resource, match, query)
            return
        rv, items = self.server.store.listing(resource, match)
        kind = "PodList" if resource == "pods" else "NetworkAttachmentDefinitionList"
        api = "v1" if resource == "pods" else NAD_GROUP
        self._send(200, {"kind": kind, "apiVersion": api,
                         "metadata": {"resourceVersion": str(rv)}, "items": items})

    def do_PUT(self) -> None:
        resource, namespace, name, sub, _ = self._route()
        self.server.count(self.command, resource, False)
        self._body()
        obj = self.server.store.get(resource, namespace, name)
        if resource == "pods" and sub == "status" and obj is not None:
            self._send(200, obj)
        else:
            self._status(404, "NotFound", f"{self.path} is not served by the fake API")

    def do_POST(self) -> None:
        resource, namespace, _, _, _ = self._route()
        self.server.count(self.command, resource, False)
        self._body()
        if resource == "events":
            self._send(201, {"kind": "Event", "apiVersion": "v1",
                             "metadata": {"name": uuid.uuid4().hex, "namespace": namespace}})
        else:
            self._status(405, "MethodNotAllowed", "the fake API creates nothing but events")

    def do_PATCH(self) -> None:
        self.do_POST()

    # -- watch -----------------------------------------------------------------------------------
    def _chunk(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _watch(self, resource: str, match: Any, query: dict[str, list[str]]) -> None:
        store = self.server.store
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        since = int((query.get("resourceVersion") or ["0"])[0] or 0)
        if query.get("sendInitialEvents") == ["true"]:
            since, items = store.listing(resource, match)
            for obj in items:
                self._chunk({"type": "ADDED", "object": obj})
            kind = "Pod" if resource == "pods" else "NetworkAttachmentDefinition"
            api = "v1" if resource == "pods" else NAD_GROUP
            self._chunk({"type": "BOOKMARK", "object": {
                "kind": kind, "apiVersion": api, "metadata": {
                    "resourceVersion": str(since),
                    "annotations": {"k8s.io/initial-events-end": "true"}}}})
        elif since == 0:
            since = store.rv
        try:
            self._stream(resource, match, since)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            return
        self.close_connection = True

    def _stream(self, resource: str, match: Any, since: int) -> None:
        store = self.server.store
        while True:
            with store.changed:
                pending = [e for e in store.events if e.rv > since and e.resource == resource]
                if not pending and not store.stopping:
                    store.changed.wait(POLL)
                    continue
                if store.stopping:
                    return
            for event in pending:
                since = event.rv
                if match(event.obj):
                    self._chunk({"type": event.type, "object": event.obj})


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, store: Store) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.store = store
        self.counts: Counter[tuple[str, str, bool]] = Counter()
        self._lock = threading.Lock()

    def count(self, method: str, resource: str, watch: bool) -> None:
        with self._lock:
            self.counts[(method, resource, watch)] += 1

    def counted(self, method: str, resource: str, watch: bool) -> int:
        with self._lock:
            return self.counts[(method, resource, watch)]


def make_cert(work: Path) -> tuple[Path, Path]:
    """A self-signed certificate for IP 127.0.0.1 and its key (openssl(1)); 1 day is plenty."""
    cert, key = work / "apiserver.crt", work / "apiserver.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=dgmu-fake-apiserver",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )
    return cert, key


class KubeAPI:
    """The fake API server: start(), objects in and out, counts, stop()."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.store = Store()
        self.server: Server | None = None
        self.thread: threading.Thread | None = None
        self.cert: Path | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self.cert, key = make_cert(self.work)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, key)
        self.server = Server(self.store)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, name="dgmu-kubeapi",
                                       daemon=True)
        self.thread.start()

    def stop(self) -> None:
        with self.store.changed:
            self.store.stopping = True
            self.store.changed.notify_all()
        self.close()

    def close(self) -> None:
        """Stop listening (the store and its watchers are kept)."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        if self.thread is not None:
            self.thread.join(timeout=30)
            self.thread = None

    # -- objects ---------------------------------------------------------------------------------
    def put_pod(self, namespace: str, name: str, uid: str, node: str,
                annotations: dict[str, str] | None = None) -> None:
        self.store.put("pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": uid,
                         "annotations": dict(annotations or {})},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]},
            "status": {"phase": "Pending"}})

    def delete_pod(self, namespace: str, name: str) -> bool:
        return self.store.delete("pods", namespace, name)

    def has_pod(self, namespace: str, name: str) -> bool:
        return self.store.get("pods", namespace, name) is not None

    def put_nad(self, namespace: str, name: str, config: dict[str, Any]) -> None:
        self.store.put("network-attachment-definitions", {
            "apiVersion": NAD_GROUP, "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4())},
            "spec": {"config": json.dumps(config)}})

    def count(self, method: str, resource: str, watch: bool = False) -> int:
        assert self.server is not None
        return self.server.counted(method, resource, watch)

    # -- clients' files --------------------------------------------------------------------------
    def kubeconfig(self, path: Path) -> Path:
        assert self.cert is not None
        ca = base64.b64encode(self.cert.read_bytes()).decode()
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "dgmu",
            "clusters": [{"name": "dgmu", "cluster": {"server": self.url,
                                                      "certificate-authority-data": ca}}],
            "users": [{"name": "dgmu", "user": {"token": TOKEN}}],
            "contexts": [{"name": "dgmu", "context": {"cluster": "dgmu", "user": "dgmu"}}],
        }
        path.write_text(json.dumps(config, indent=1), encoding="utf-8")  # YAML is a JSON superset
        return path

    def service_account(self, directory: Path) -> dict[str, str]:
        """Write token, ca.crt and namespace (what a pod's service account mount holds) into
        directory; return the environment the in-cluster client reads."""
        assert self.cert is not None
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "token").write_text(TOKEN, encoding="utf-8")
        (directory / "ca.crt").write_bytes(self.cert.read_bytes())
        (directory / "namespace").write_text("kube-system", encoding="utf-8")
        return {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(self.port)}
