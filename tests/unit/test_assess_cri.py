"""cni_delguard/ops/assess/cri.py: the CRI Version call, against grpcio's own HTTP/2 server.

The server is grpcio's (a full HTTP/2 and gRPC implementation: SETTINGS, window updates, HPACK
with Huffman, trailers), serving RuntimeService/Version with a handler written here; it stands
for a runtime's CRI server only in what it answers (a runtime, CRI-O or containerd, is the
e2e suites' part: tests/e2e_cri/test_assess.py asks each real one). The answer is encoded with
protobuf's own encoder, from a message type declared here with the field numbers of CRI's
api.proto (VersionResponse: version 1, runtime_name 2, runtime_version 3, runtime_api_version 4).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import pytest

from cni_delguard.ops.assess import cri

grpc = pytest.importorskip("grpc")
descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
message_factory = pytest.importorskip("google.protobuf.message_factory")
descriptor_pool = pytest.importorskip("google.protobuf.descriptor_pool")


def _message_classes() -> tuple[type, type]:
    """VersionRequest and VersionResponse as CRI's api.proto declares them (their fields)."""
    proto = descriptor_pb2.FileDescriptorProto(name="assess_cri_test.proto",
                                               package="runtime.v1", syntax="proto3")
    request = proto.message_type.add(name="VersionRequest")
    request.field.add(name="version", number=1, type=9, label=1)
    response = proto.message_type.add(name="VersionResponse")
    for number, name in enumerate(("version", "runtime_name", "runtime_version",
                                   "runtime_api_version"), start=1):
        response.field.add(name=name, number=number, type=9, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return tuple(message_factory.GetMessageClass(pool.FindMessageTypeByName(f"runtime.v1.{name}"))
                 for name in ("VersionRequest", "VersionResponse"))  # type: ignore[return-value]


REQUEST, RESPONSE = _message_classes()


class Server:
    def __init__(self, path: Path, services: tuple[str, ...], name: str, version: str) -> None:
        self.requests: list[str] = []

        def answer(data: bytes, context: object) -> bytes:
            self.requests.append(REQUEST.FromString(data).version)
            return RESPONSE(version="0.1.0", runtime_name=name, runtime_version=version,
                            runtime_api_version="v1").SerializeToString()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        for service in services:
            handler = grpc.method_handlers_generic_handler(f"{service}.RuntimeService", {
                "Version": grpc.unary_unary_rpc_method_handler(
                    answer, request_deserializer=lambda b: b, response_serializer=lambda b: b)})
            self.server.add_generic_rpc_handlers((handler,))
        self.server.add_insecure_port(f"unix://{path}")
        self.server.start()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[object]:
    servers: list[Server] = []

    def start(services: tuple[str, ...], name: str = "containerd",
              version: str = "v1.7.22") -> tuple[Path, Server]:
        path = tmp_path / f"cri-{len(servers)}.sock"
        servers.append(Server(path, services, name, version))
        return path, servers[-1]

    yield start
    for s in servers:
        s.server.stop(0)


@pytest.mark.parametrize(
    ("services", "name", "version", "answered"),
    [
        pytest.param(("runtime.v1",), "cri-o", "1.36.3", "runtime.v1", id="v1"),
        pytest.param(("runtime.v1alpha2",), "containerd", "v1.5.18", "runtime.v1alpha2",
                     id="v1alpha2-only"),
        pytest.param(("runtime.v1", "runtime.v1alpha2"), "containerd", "1.6.20~ds1",
                     "runtime.v1", id="both"),
    ],
)
def test_the_runtimes_answer(serve, services, name, version, answered) -> None:
    path, server = serve(services, name, version)
    got = cri.version(str(path))
    assert (got.runtime_name, got.runtime_version, got.api_version, got.service) == (
        name, version, "v1", answered)
    assert server.requests[-1] == "v1"


def test_a_version_longer_than_a_frame_header_byte(serve) -> None:
    long = "v2.1.6-" + "x" * 300  # lengths above 127 take more than one varint byte
    path, _ = serve(("runtime.v1",), "containerd", long)
    assert cri.version(str(path)).runtime_version == long


def test_a_server_without_the_service_is_an_error(serve) -> None:
    path, _ = serve(("runtime.v9",))
    with pytest.raises(cri.CriError, match=r"no Version answer on runtime\.v1 or .*v1alpha2"):
        cri.version(str(path))


def test_no_socket_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(cri.CriError, match="No such file"):
        cri.version(str(tmp_path / "none.sock"))


def test_a_listener_that_never_answers_is_cut_at_the_deadline(tmp_path: Path) -> None:
    path = tmp_path / "mute.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(4)
        started = time.monotonic()
        with pytest.raises(cri.CriError):
            cri.version(str(path), timeout=0.5)
        # one deadline per service asked: well under a few seconds
        assert time.monotonic() - started < 5


def test_a_peer_that_hangs_up_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "rude.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)

    def hang_up() -> None:
        """Each connection: read all the client sent (a close with unread data would be a
        reset), then close it; until the listener is shut down."""
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # shut down: the test is over
                return
            conn.settimeout(0.5)
            try:
                while conn.recv(65536):
                    pass
            except TimeoutError:
                pass
            conn.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    try:
        with pytest.raises(cri.CriError, match="closed the connection"):
            cri.version(str(path), timeout=5)
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        thread.join(10)
        listener.close()
    assert not thread.is_alive()


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(b"\x12\x05abc", id="cut-short"),
        pytest.param(b"\x13", id="wire-type-3"),
        pytest.param(b"\x12\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", id="huge-length"),
    ],
)
def test_a_broken_answer_is_an_error_not_a_crash(message: bytes) -> None:
    with pytest.raises(cri.CriError):
        cri._fields(message)
