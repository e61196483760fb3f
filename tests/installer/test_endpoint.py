"""monitoring/endpoint.py and exporter.py: the scrape endpoint answers a scraper, and a slow, greedy
or hostile client can neither stall it for long nor reach the watcher; a port that cannot be bound
is one line in the watcher's log and nothing else. Real sockets on loopback, real threads."""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from cni_delguard.monitoring import endpoint
from cni_delguard.monitoring.exporter import Exporter
from tests.support.waiting import wait_for

BODY = b"# HELP cni_delguard_x x\n# TYPE cni_delguard_x gauge\ncni_delguard_x 1.0\n"


def render(accept: str) -> tuple[bytes, str]:
    return BODY, "text/plain; version=0.0.4; charset=utf-8"


@pytest.fixture
def served():
    ep = endpoint.Endpoint("127.0.0.1", 0, render)
    ep.start()
    yield ep, int(ep.address.rsplit(":", 1)[1])
    ep.close()


def get(port: int, path: str = "/metrics", method: str = "GET", timeout: float = 10):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - loopback
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("127.0.0.1:9100", ("127.0.0.1", 9100), id="ipv4"),
        pytest.param("[::1]:9100", ("::1", 9100), id="ipv6"),
        pytest.param(":10647", ("", 10647), id="every-address"),
        pytest.param("10.1.2.3", ("10.1.2.3", endpoint.DEFAULT_PORT), id="ip-alone"),
        pytest.param("[fd00::1]", ("fd00::1", endpoint.DEFAULT_PORT), id="ipv6-alone"),
        pytest.param("127.0.0.1:0", ("127.0.0.1", 0), id="any-free-port"),
        pytest.param("[10.1.2.3]:10647", ("10.1.2.3", 10647), id="ipv4-in-brackets"),
    ],
)
def test_addresses(text, expected):
    assert endpoint.parse_address(text) == expected


@pytest.mark.parametrize(
    ("text", "environ", "expected"),
    [
        pytest.param("[$(HOST_IP)]:10647", {"HOST_IP": "10.1.2.3"}, ("10.1.2.3", 10647),
                     id="ipv4-node"),
        pytest.param("[$(HOST_IP)]:10647", {"HOST_IP": "fd00::7"}, ("fd00::7", 10647),
                     id="ipv6-node"),
        pytest.param("$(HOST_IP)", {"HOST_IP": "10.1.2.3"}, ("10.1.2.3", endpoint.DEFAULT_PORT),
                     id="ip-alone"),
        pytest.param(":10647", {}, ("", 10647), id="nothing-to-expand"),
    ],
)
def test_the_downward_apis_host_ip(text, environ, expected):
    """The monitoring component's `[$(HOST_IP)]:10647`: Kubernetes expands it from the env the
    downward API fills; the watcher expands what was left, as the same rule would."""
    assert endpoint.parse_address(endpoint.expand(text, environ)) == expected


@pytest.mark.parametrize(
    ("text", "environ"),
    [
        pytest.param("[$(HOST_IP)]:10647", {}, id="not-set"),
        pytest.param("[$(HOST_IP)]:10647", {"HOST_IP": "node1"}, id="a-name-not-an-ip"),
        pytest.param("[$(HOST_IP)]:10647", {"HOST_IP": ""}, id="empty"),
    ],
)
def test_a_host_ip_that_is_missing_or_not_an_ip_is_refused(text, environ):
    with pytest.raises(endpoint.AddressError):
        endpoint.parse_address(endpoint.expand(text, environ))


@pytest.mark.parametrize(
    "text", ["localhost:9100", "node1", "[]:1", "1.2.3.4:65536", "1.2.3.4:x", "[::1]9"]
)
def test_addresses_refused(text):
    with pytest.raises(endpoint.AddressError):
        endpoint.parse_address(text)


def test_metrics_and_nothing_else(served):
    _, port = served
    assert get(port) == (200, BODY)
    assert get(port, method="HEAD") == (200, b"")
    assert get(port, "/metrics?name[]=x")[0] == 200
    assert get(port, "/")[0] == 404
    assert get(port, "/metrics/../etc/passwd")[0] == 404
    assert get(port, method="POST")[0] == 405


def raw(port: int, data: bytes, timeout: float = 15) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def test_garbage_and_oversized_requests_are_refused(served):
    _, port = served
    assert raw(port, b"\x00\xff garbage\r\n\r\n").startswith(b"HTTP/1.0 400")
    huge = b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n"
    assert raw(port, huge).startswith(b"HTTP/1.0 431")


def test_a_client_that_trickles_its_request_is_cut_off(served):
    """One byte every 0.25 s: each recv is quick, the whole request never comes."""
    _, port = served
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(0.25)
    start, answer, closed = time.monotonic(), b"", False
    try:
        while not closed and time.monotonic() - start < endpoint.DEADLINE + 10:
            try:
                s.sendall(b"G")
                chunk = s.recv(100)
            except TimeoutError:
                continue
            except OSError:  # reset by the server
                closed = True
                break
            answer += chunk
            closed = not chunk
    finally:
        s.close()
    assert closed, "the server kept a trickling client past its deadline"
    assert answer in (b"", ) or answer.startswith(b"HTTP/1.0 408")


def test_past_the_bound_the_oldest_silent_client_is_dropped_and_told_so(served):
    """From one address, MAX_PER_SOURCE connections are kept: each one more drops the oldest
    that is still silent (a 503, then closed), never the newcomer; the others, at the deadline
    (a 408). Either way a scrape is served."""
    _, port = served
    idle = idle_connections(port, "127.0.0.1", endpoint.MAX_PER_SOURCE + 1)
    try:
        idle[0].settimeout(10)
        assert idle[0].recv(100).startswith(b"HTTP/1.0 503")
        idle[1].settimeout(endpoint.DEADLINE + 10)
        assert idle[1].recv(100).startswith(b"HTTP/1.0 408")
        assert get(port) == (200, BODY)
    finally:
        for s in idle:
            s.close()


def test_a_render_that_fails_is_a_500_and_the_endpoint_serves_on():
    calls = []

    def flaky(accept: str) -> tuple[bytes, str]:
        calls.append(accept)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return render(accept)

    ep = endpoint.Endpoint("127.0.0.1", 0, flaky)
    ep.start()
    try:
        port = int(ep.address.rsplit(":", 1)[1])
        assert get(port)[0] == 500
        assert get(port) == (200, BODY)
    finally:
        ep.close()


class Feed:
    def __init__(self) -> None:
        self.refreshed = threading.Event()

    def refresh(self) -> None:
        self.refreshed.set()

    def render(self, accept: str) -> tuple[bytes, str]:
        return render(accept)

    def write(self, path: str) -> None:
        raise OSError(30, "Read-only file system")


def test_a_port_in_use_is_one_line_and_the_exporter_keeps_refreshing():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    said: list[str] = []
    feed = Feed()
    ex = Exporter(feed, f"127.0.0.1:{port}", None, 0.05, said.append)
    ex.start()
    try:
        time.sleep(0.5)
        assert feed.refreshed.is_set()
        assert len(said) == 1 and f"cannot listen on 127.0.0.1:{port}" in said[0], said
        assert "still guarded" in said[0]
        holder.close()  # the port is free again: taken at the next try
        wait_for(lambda: ex.endpoint is not None, "the endpoint on the freed port", 10,
                 every=0.05)
        assert get(port) == (200, BODY)
        assert said[-1].startswith("metrics: serving http://127.0.0.1:")
    finally:
        ex.stop()
        holder.close()


def test_a_bad_address_and_an_unwritable_textfile_are_said_once(tmp_path):
    said: list[str] = []
    ex = Exporter(Feed(), "localhost:10647", str(tmp_path / "m.prom"), 0.02, said.append)
    ex.start()
    try:
        time.sleep(0.4)
    finally:
        ex.stop()
    assert ex.endpoint is None
    assert len(said) == 2, said
    assert "--metrics-address 'localhost:10647'" in said[0] and "still guarding" in said[0]
    assert f"cannot write {tmp_path}/m.prom: Read-only file system" in said[1]


def test_the_exporter_binds_the_host_ip_the_downward_api_gives(monkeypatch):
    """`--metrics-address [$(HOST_IP)]:PORT` with HOST_IP in the watcher's env (what the
    monitoring component's env gives it): bound to that address only."""
    monkeypatch.setenv("HOST_IP", "127.0.0.1")
    said: list[str] = []
    ex = Exporter(Feed(), "[$(HOST_IP)]:0", None, 0.05, said.append)
    ex.start()
    try:
        wait_for(lambda: ex.endpoint is not None, "the endpoint", 30, every=0.05)
        assert ex.endpoint is not None
        host, _, port = ex.endpoint.address.rpartition(":")
        assert host == "127.0.0.1"
        assert get(int(port)) == (200, BODY)
        assert said == [f"metrics: serving http://127.0.0.1:{port}/metrics"]
    finally:
        ex.stop()


def test_a_host_ip_not_given_is_one_line_naming_it(monkeypatch):
    monkeypatch.delenv("HOST_IP", raising=False)
    said: list[str] = []
    ex = Exporter(Feed(), "[$(HOST_IP)]:10647", None, 0.05, said.append)
    ex.start()
    ex.stop()
    assert ex.endpoint is None
    assert len(said) == 1 and "$(HOST_IP) is not set" in said[0], said
    assert "status.hostIP" in said[0] and "still guarding" in said[0]


IDLE = 64  # the N: connections that connect and send nothing


def idle_connections(port: int, source: str, count: int = IDLE) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", port), source_address=(source, 0))
            for _ in range(count)]


@pytest.mark.parametrize("source", ["127.0.0.1", "127.0.0.2"], ids=["same-source", "another"])
def test_64_idle_connections_do_not_stop_a_scrape(served, source):
    """64 connections that send nothing, reopened as soon as they are dropped (what a client
    that wants the node's alerts silent does): every scrape is still served, at once, whether
    they come from the scraper's own address or from another."""
    _, port = served
    idle = idle_connections(port, source)
    try:
        time.sleep(0.3)
        for _ in range(10):
            start = time.monotonic()
            assert get(port, timeout=endpoint.DEADLINE - 1) == (200, BODY)
            assert time.monotonic() - start < endpoint.DEADLINE - 1
            for i, s in enumerate(idle):  # reopen what the server dropped
                s.setblocking(False)
                try:
                    dropped = s.recv(1) == b""
                except BlockingIOError:
                    dropped = False
                except OSError:
                    dropped = True
                if dropped:
                    s.close()
                    (idle[i],) = idle_connections(port, source, 1)
    finally:
        for s in idle:
            s.close()


class Counts:
    metrics = ""


def test_a_port_another_process_holds_is_said_where_the_ready_probe_reads_it():
    """The watcher cannot serve on a port another process listens on (which could answer
    'guarded' for it): what it says goes into the watcher's counts, which its heartbeat carries
    to `ready --live-file`; once the port is free and served, it is cleared."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    counts = Counts()
    ex = Exporter(Feed(), f"127.0.0.1:{port}", None, 0.05, lambda _: None, counts=counts)
    ex.start()
    try:
        wait_for(lambda: counts.metrics, "the exporter to say the port is held", 10)
        assert f"127.0.0.1:{port}" in counts.metrics
        assert "another process" in counts.metrics
        holder.close()
        wait_for(lambda: ex.endpoint is not None, "the endpoint to start", 10)
        assert counts.metrics == ""
    finally:
        ex.stop()
        holder.close()
