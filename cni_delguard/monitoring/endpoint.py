"""The watcher's scrape endpoint: a small HTTP/1.0 server that answers `GET /metrics` with what
`render` returns (the counters of monitoring/series.py, nothing else: no file, no path, no log
line).

Not prometheus-client's own `start_http_server`: that is wsgiref under ThreadingMixIn, one thread
per connection with no limit and no timeout, so a client that connects and sends nothing holds a
thread for ever, and a thousand of them a thousand threads. This one is bounded everywhere:
- its own threads: the accept loop, and at most MAX_CLIENTS handlers; a connection beyond them
  gets a 503 and is closed at once (nothing queues behind a slow client);
- a request must arrive whole within DEADLINE seconds and fit in MAX_REQUEST bytes, however
  slowly it trickles in; the answer must be taken within DEADLINE too;
- one request per connection (HTTP/1.0, `Connection: close`): no idle keep-alive holds a slot.
Prometheus scrapes with a new connection each time well within these bounds (a request of about
300 bytes, an answer of about 5 KiB). The watcher's guarding never waits on any of it: it runs in
its own thread, and everything here runs in threads of its own.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

Render = Callable[[str], tuple[bytes, str]]  # the Accept header -> (body, content type)
_Request = socket.socket | tuple[bytes, socket.socket]  # socketserver's (TCP: the socket)

# Not in Prometheus' exporter range 9100-9999 (all allocated), nor a Kubernetes component's
# (10248-10259), kube-ovn's (10660-10665), Antrea's (10349-10351), Calico's (9091, 9093) or
# Cilium's (9962-9965), nor in Linux's ephemeral range (32768-60999).
DEFAULT_PORT = 10647
MAX_CLIENTS = 4
MAX_REQUEST = 8192
DEADLINE = 5.0
PATH = "/metrics"


class AddressError(ValueError):
    """A --metrics-address that is not HOST:PORT."""


_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand(text: str, environ: Mapping[str, str]) -> str:
    """`$(NAME)` replaced by that variable of `environ`, as Kubernetes expands a container's
    args from its env (the monitoring component binds `[$(HOST_IP)]:10647`, HOST_IP from the
    downward API), so the same argument works where nothing expanded it (podman run -e)."""

    def value(m: re.Match[str]) -> str:
        if m[1] not in environ:
            raise AddressError(
                f"{text!r}: {m[0]} is not set (give the container env {m[1]} from the "
                "downward API, fieldRef status.hostIP)"
            )
        return environ[m[1]]

    return _REFERENCE.sub(value, text)


def parse_address(text: str) -> tuple[str, int]:
    """`IP:PORT`, `[IP]:PORT` (IPv6, or IPv4: `[$(HOST_IP)]:PORT` holds either), `:PORT` (every
    address), or an IP alone (DEFAULT_PORT). An IP, not a name: the node's DNS may be what is
    broken, and the watcher must not wait on it."""
    if _is_ip(text):
        return text, DEFAULT_PORT
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else "" if not rest else None
    else:
        host, sep, port = text.rpartition(":")
        port = port if sep else None
    if port is None or (host and not _is_ip(host)) or (text.startswith("[") and not host):
        raise AddressError(f"{text!r} is not IP:PORT, [IPv6]:PORT, :PORT or an IP")
    if port == "":
        return host, DEFAULT_PORT
    if not port.isdigit() or int(port) > 65535:
        raise AddressError(f"{text!r}: the port must be a number from 0 to 65535")
    return host, int(port)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def show(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host or '*'}:{port}"


class Endpoint:
    """Listening as soon as it is made (OSError when the address cannot be bound); serving once
    `start()` is called, until `close()`."""

    def __init__(self, host: str, port: int, render: Render) -> None:
        self.server = _Server(host, port, render)
        bound = self.server.socket.getsockname()
        self.address = show(host, bound[1])
        self.thread = threading.Thread(
            target=self.server.serve_forever,
            kwargs={"poll_interval": 1.0},
            name="cni-delguard-metrics-http",
            daemon=True,
        )

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
        self.server.server_close()


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True  # a handler never keeps the process from exiting
    allow_reuse_address = True  # a restarted watcher binds again past TIME_WAIT
    request_queue_size = 16

    def __init__(self, host: str, port: int, render: Render) -> None:
        self.render = render
        self.slots = threading.BoundedSemaphore(MAX_CLIENTS)
        self.address_family = socket.AF_INET6 if ":" in host or not host else socket.AF_INET
        try:
            super().__init__((host or "::", port), _Handler)
        except OSError:
            if host:
                raise
            self.address_family = socket.AF_INET  # a node without IPv6: every IPv4 address
            super().__init__(("0.0.0.0", port), _Handler)  # noqa: S104 - asked for: `:PORT`

    def server_bind(self) -> None:
        if self.address_family == socket.AF_INET6:  # `::` takes IPv4 clients too
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()

    def process_request(self, request: _Request, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            if isinstance(request, socket.socket):
                _answer_quietly(request, _response(503, b"busy\n", "text/plain"))
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: _Request, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that misbehaves is its own problem: no traceback in the watcher's log."""


class _Handler(socketserver.BaseRequestHandler):
    request: socket.socket
    server: _Server

    def handle(self) -> None:
        deadline = time.monotonic() + DEADLINE
        head = _read_head(self.request, deadline)
        if head is None:
            return
        answer = _answer(head, self.server.render)
        self.request.settimeout(max(0.01, deadline - time.monotonic()))
        self.request.sendall(answer)


def _read_head(sock: socket.socket, deadline: float) -> bytes | None:
    """The request line and headers, or None when they do not come whole in time or in size."""
    data = b""
    while b"\r\n\r\n" not in data and b"\n\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or len(data) >= MAX_REQUEST:
            status = 408 if left <= 0 else 431
            _answer_quietly(sock, _response(status, b"", "text/plain"))
            return None
        sock.settimeout(left)
        try:
            chunk = sock.recv(MAX_REQUEST - len(data))
        except OSError:  # a timeout, or a reset
            return None
        if not chunk:
            return None
        data += chunk
    return data


def _answer(head: bytes, render: Render) -> bytes:
    lines = head.decode("latin-1").replace("\r\n", "\n").split("\n")
    parts = lines[0].split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return _response(400, b"bad request\n", "text/plain")
    method, target = parts[0], parts[1].partition("?")[0]
    if method not in ("GET", "HEAD"):
        return _response(405, b"GET or HEAD only\n", "text/plain", ("Allow: GET, HEAD",))
    if target != PATH:
        return _response(404, b"metrics are at /metrics\n", "text/plain")
    accept = ""
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "accept":
            accept = value.strip()
    try:
        body, content_type = render(accept)
    except Exception:  # noqa: BLE001 - a scrape must never take the endpoint down
        return _response(500, b"cannot render the metrics\n", "text/plain")
    return _response(200, body, content_type, head_only=method == "HEAD")


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 431: "Request Header Fields Too Large", 500:
            "Internal Server Error", 503: "Service Unavailable"}


def _response(
    status: int,
    body: bytes,
    content_type: str,
    extra: tuple[str, ...] = (),
    head_only: bool = False,
) -> bytes:
    head = [
        f"HTTP/1.0 {status} {_REASONS[status]}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *extra,
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else body)


def _answer_quietly(sock: socket.socket, data: bytes) -> None:
    """A best-effort short answer that never waits on the client."""
    try:
        sock.setblocking(False)
        sock.send(data)
    except OSError:
        pass
