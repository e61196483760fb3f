"""The watcher's scrape endpoint: a small HTTP/1.0 server that answers `GET /metrics` with what
`render` returns (the counters of monitoring/series.py, nothing else: no file, no path, no log
line).

Not prometheus-client's own `start_http_server`: that is wsgiref under ThreadingMixIn, one thread
per connection with no limit and no timeout, so a client that connects and sends nothing holds a
thread for ever, and a thousand of them a thousand threads. Nor a pool of a few handler threads:
four slots held by four idle connections, reopened as they were dropped, made every scrape a 503
(and the node's alerts silent). This one is one thread and one loop (selectors) over non-blocking
sockets, bounded everywhere:
- a connection costs a socket and its buffers, never a thread: at most MAX_CONNECTIONS at once,
  MAX_PER_SOURCE of them from one address; a new one is always taken in, and past either bound
  the oldest one still sending its request (of that address, else of the address that has the
  most) is dropped. A scraper sends its request as it connects, so idle connections, however many
  and from wherever, are what goes: 64 of them do not stop a scrape (tests/installer/
  test_endpoint.py);
- a request must arrive whole within DEADLINE seconds and fit in MAX_REQUEST bytes, however
  slowly it trickles in; the answer must be taken within DEADLINE too;
- one request per connection (HTTP/1.0, `Connection: close`): no idle keep-alive holds a socket.
Prometheus scrapes with a new connection each time well within these bounds (a request of about
300 bytes, an answer of about 5 KiB, rendered in about 2 ms in this thread). The watcher's guarding
never waits on any of it: it runs in its own thread. A port another process listens on is never
shared (no SO_REUSEPORT): the bind fails, and the exporter says so.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import selectors
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Render = Callable[[str], tuple[bytes, str]]  # the Accept header -> (body, content type)

# Not in Prometheus' exporter range 9100-9999 (all allocated), nor a Kubernetes component's
# (10248-10259), kube-ovn's (10660-10665), Antrea's (10349-10351), Calico's (9091, 9093) or
# Cilium's (9962-9965), nor in Linux's ephemeral range (32768-60999).
DEFAULT_PORT = 10647
# Connections open at once, and from one address. Prometheus HA scrapes each node from two
# replicas, a debugging `curl` or two from elsewhere: 8 from one address is four times that; 64
# in all is a few sockets and at most 64 x (8 KiB in + an answer out) of memory.
MAX_CONNECTIONS = 64
MAX_PER_SOURCE = 8
MAX_REQUEST = 8192
DEADLINE = 5.0
PATH = "/metrics"
POLL = 1.0  # seconds the loop waits at most, so that close() is seen


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
        self.render = render
        self.listener = _listen(host, port)
        self.address = show(host, self.listener.getsockname()[1])
        self.stopped = threading.Event()
        self.wake, self.waker = socket.socketpair()
        self.conns: dict[socket.socket, _Conn] = {}
        self.selector = selectors.DefaultSelector()
        self.thread = threading.Thread(target=self._serve, name="cni-delguard-metrics-http",
                                       daemon=True)

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            self.waker.send(b"x")
            self.thread.join(10)
        for s in (*self.conns, self.listener, self.wake, self.waker):
            s.close()
        self.conns.clear()
        self.selector.close()

    def _serve(self) -> None:
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.selector.register(self.wake, selectors.EVENT_READ)
        while not self.stopped.is_set():
            now = time.monotonic()
            wait = min([POLL, *(c.deadline - now for c in self.conns.values())])
            for key, _ in self.selector.select(max(0.0, wait)):
                if key.fileobj is self.listener:
                    self._accept()
                elif key.fileobj is not self.wake:
                    conn = self.conns.get(key.fileobj)  # type: ignore[call-overload]
                    if conn is not None:  # not dropped earlier in this turn
                        self._step(conn)
            self._expire(time.monotonic())

    def _accept(self) -> None:
        for _ in range(MAX_CONNECTIONS):  # what is queued now; the rest at the next turn
            try:
                sock, peer = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # ECONNABORTED, EMFILE: the next turn tries again
                return
            sock.setblocking(False)
            self._admit(_Conn(sock, str(peer[0]), time.monotonic() + DEADLINE))

    def _admit(self, conn: _Conn) -> None:
        """Take the new connection in; past a bound, drop the oldest one not being answered
        (still sending its request, or answered and not closing): of the same address, else
        of the address that has the most."""
        idle = [c for c in self.conns.values() if c.state != WRITING]
        same = [c for c in idle if c.source == conn.source]
        if len(same) >= MAX_PER_SOURCE:
            self._drop(same[0], 503)
        elif len(self.conns) >= MAX_CONNECTIONS and idle:
            busiest = Counter(c.source for c in idle).most_common(1)[0][0]
            self._drop(next(c for c in idle if c.source == busiest), 503)
        self.conns[conn.sock] = conn
        self.selector.register(conn.sock, selectors.EVENT_READ)

    def _step(self, conn: _Conn) -> None:
        try:
            if conn.state == READING:
                self._read(conn)
            elif conn.state == WRITING:
                self._write(conn)
            elif not conn.sock.recv(MAX_REQUEST):  # closing: what is left, until the client
                self._close(conn)  # has closed too (no reset that could cut the answer short)
        except OSError:  # a reset, a broken pipe: the client's problem
            self._close(conn)

    def _read(self, conn: _Conn) -> None:
        chunk = conn.sock.recv(MAX_REQUEST - len(conn.head))
        if not chunk:
            self._close(conn)
            return
        conn.head += chunk
        if b"\r\n\r\n" in conn.head or b"\n\n" in conn.head:
            conn.out = _answer(conn.head, self.render)
        elif len(conn.head) >= MAX_REQUEST:
            conn.out = _response(431, b"", "text/plain")
        else:
            return
        conn.state = WRITING
        conn.deadline = time.monotonic() + DEADLINE  # the answer must be taken in time too
        self.selector.modify(conn.sock, selectors.EVENT_WRITE)
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        sent = conn.sock.send(conn.out)
        conn.out = conn.out[sent:]
        if not conn.out:  # all of it: say so (FIN), and read what the client still sends
            conn.sock.shutdown(socket.SHUT_WR)
            conn.state = CLOSING
            self.selector.modify(conn.sock, selectors.EVENT_READ)

    def _expire(self, now: float) -> None:
        for conn in [c for c in self.conns.values() if c.deadline <= now]:
            self._drop(conn, 408 if conn.state == READING else None)

    def _drop(self, conn: _Conn, status: int | None) -> None:
        if status is not None:
            _answer_quietly(conn.sock, _response(status, b"", "text/plain"))
        self._close(conn)

    def _close(self, conn: _Conn) -> None:
        self.conns.pop(conn.sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(conn.sock)
        conn.sock.close()


READING, WRITING, CLOSING = "reading", "writing", "closing"


@dataclass
class _Conn:
    sock: socket.socket
    source: str  # the peer's address: what the per-source bound counts
    deadline: float  # monotonic: by when the request (then the answer, the close) must be through
    state: str = READING
    head: bytes = b""
    out: bytes = b""  # the answer, once the request is whole


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on `host` (`::` taking IPv4 clients too when no host is given, every
    IPv4 address on a node without IPv6). SO_REUSEADDR, so that a restarted watcher binds
    again past TIME_WAIT; never SO_REUSEPORT, so that a port another process listens on is
    refused rather than shared."""
    family = socket.AF_INET6 if ":" in host or not host else socket.AF_INET
    try:
        return _bound(family, host or "::", port)
    except OSError:
        if host:
            raise
        return _bound(socket.AF_INET, "0.0.0.0", port)  # noqa: S104 - asked for: `:PORT`


def _bound(family: socket.AddressFamily, host: str, port: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and host == "::":
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


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
