"""Ask a running runtime its name and version: CRI's RuntimeService/Version over its unix socket.

The running daemon's answer, not the binary on disk (after an upgrade that has not restarted the
runtime, the two differ; the matrix is about what runs). One unary gRPC call, spoken here in the
little HTTP/2 it needs, so the bundle carries no gRPC library: the client preface and an empty
SETTINGS, one HEADERS frame (HPACK literals without indexing, no Huffman: RFC 7541 6.2.2), one
DATA frame with the gRPC message, then frames are read until the stream ends: the server's
SETTINGS and PINGs are acknowledged, its headers are not decoded (only the message is needed),
DATA on the stream is the answer. `runtime.v1` first; a runtime that answers it no message (older
containerd serves only v1alpha2) is asked `runtime.v1alpha2` on a new connection.

Bounded: a deadline for the whole exchange, at most 64 KiB read. Read-only: Version changes
nothing. Any failure is a CriError with one line of why.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

SERVICES = ("runtime.v1", "runtime.v1alpha2")
TIMEOUT = 5.0  # seconds for one exchange: a local daemon answers Version in milliseconds
_MAX_READ = 64 * 1024
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA, _HEADERS, _RST, _SETTINGS, _PING, _GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7
_END_STREAM, _ACK, _END_HEADERS, _PADDED = 0x1, 0x1, 0x4, 0x8
_STREAM = 1


class CriError(Exception):
    """The runtime could not be asked, or gave no answer that could be read."""


@dataclass(frozen=True)
class Version:
    runtime_name: str  # "containerd", "cri-o"
    runtime_version: str  # as the runtime reports it: "v1.7.22", "1.6.20~ds1", "1.36.3"
    api_version: str  # the CRI version it answered on: "v1", ...
    service: str  # the service that answered: "runtime.v1" or "runtime.v1alpha2"


def version(path: str, timeout: float = TIMEOUT) -> Version:
    """The runtime's Version answer on the unix socket at `path`."""
    why = ""
    for service in SERVICES:
        message = _call(path, f"/{service}.RuntimeService/Version", _request(), timeout)
        if message is not None:
            fields = _fields(message)
            name, ver = fields.get(2, ""), fields.get(3, "")
            if not name or not ver:
                raise CriError(f"{path}: the Version answer names no runtime and version")
            return Version(name, ver, fields.get(4, ""), service)
        why = f"{path}: no Version answer on {' or '.join(SERVICES)}"
    raise CriError(why)


def _request() -> bytes:
    """VersionRequest{version: "v1"} (field 1, a string: the client's API version)."""
    return _field(1, b"v1")


def _field(number: int, value: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _fields(message: bytes) -> dict[int, str]:
    """The string fields of a protobuf message (number -> text); others skipped."""
    found: dict[int, str] = {}
    at = 0
    while at < len(message):
        key, at = _read_varint(message, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, at = _read_varint(message, at)
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        elif wire == 2:
            size, at = _read_varint(message, at)
            if at + size > len(message):
                raise CriError("a Version answer cut short")
            found[number] = message[at:at + size].decode("utf-8", "replace")
            at += size
        else:
            raise CriError(f"a Version answer with wire type {wire}")
    return found


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise CriError("a Version answer with a broken number")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _hpack_int(value: int, prefix: int) -> bytes:
    """An HPACK integer with an N-bit prefix (RFC 7541 5.1), the prefix's other bits zero."""
    top = (1 << prefix) - 1
    if value < top:
        return bytes([value])
    out, value = bytearray([top]), value - top
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _literal(name: str, value: str) -> bytes:
    """A header as a literal without indexing, new name, no Huffman (RFC 7541 6.2.2)."""
    raw_name, raw_value = name.encode(), value.encode()
    return (b"\x00" + _hpack_int(len(raw_name), 7) + raw_name + _hpack_int(len(raw_value), 7)
            + raw_value)


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(
        ">I", stream) + payload


def _call(path: str, method: str, request: bytes, timeout: float) -> bytes | None:
    """One unary call: the response message, or None when the stream ended without one."""
    headers = b"".join(_literal(k, v) for k, v in (
        (":method", "POST"), (":scheme", "http"), (":path", method),
        (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers")))
    body = b"\x00" + struct.pack(">I", len(request)) + request
    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(path)
            conn.sendall(_PREFACE + _frame(_SETTINGS, 0, 0)
                         + _frame(_HEADERS, _END_HEADERS, _STREAM, headers)
                         + _frame(_DATA, _END_STREAM, _STREAM, body))
            return _answer(_Reader(conn, deadline))
        except OSError as exc:
            raise CriError(f"{path}: {exc.strerror or exc}") from None


class _Reader:
    def __init__(self, conn: socket.socket, deadline: float) -> None:
        self.conn, self.deadline, self.buf, self.total = conn, deadline, b"", 0

    def take(self, n: int) -> bytes:
        while len(self.buf) < n:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise CriError("no Version answer in time")
            self.conn.settimeout(left)
            chunk = self.conn.recv(16384)
            if not chunk:
                raise CriError("the runtime closed the connection")
            self.total += len(chunk)
            if self.total > _MAX_READ:
                raise CriError("the runtime's answer is too long")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def frame(self) -> tuple[int, int, int, bytes]:
        head = self.take(9)
        length = int.from_bytes(head[:3], "big")
        stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
        return head[3], head[4], stream, self.take(length)


def _answer(reader: _Reader) -> bytes | None:
    data = b""
    while True:
        kind, flags, stream, payload = reader.frame()
        if kind == _SETTINGS and not flags & _ACK:
            reader.conn.sendall(_frame(_SETTINGS, _ACK, 0))
        elif kind == _PING and not flags & _ACK:
            reader.conn.sendall(_frame(_PING, _ACK, 0, payload))
        elif kind == _GOAWAY or (kind == _RST and stream == _STREAM):
            break
        elif stream == _STREAM and kind == _DATA:
            if flags & _PADDED and payload:
                payload = payload[1:len(payload) - payload[0]]
            data += payload
        if stream == _STREAM and kind in (_DATA, _HEADERS) and flags & _END_STREAM:
            break
    if len(data) < 5:
        return None
    size = int.from_bytes(data[1:5], "big")
    if data[0] != 0 or len(data) < 5 + size:
        raise CriError("a Version answer that is compressed or cut short")
    return data[5:5 + size]
