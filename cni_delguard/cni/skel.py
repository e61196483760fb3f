"""The CNI_* environment and stdin, read and validated before any command runs.

One table says which variables each command needs; every missing one is reported in a single
error (code 4). Identifiers that later become file names are checked against the spec's rules here,
so nothing downstream ever sees a path separator, a dot-dot or an over-long name.
"""

from __future__ import annotations

from cni_delguard.cni import errors

# `typing` is not imported at run time: it costs start-up on every exec (mypy still sees this).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import BinaryIO

# Config may carry a prevResult and a multus delegate list; 4 MiB is far beyond any real one.
MAX_STDIN = 4 * 1024 * 1024

COMMANDS = ("ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION")

# SPEC.md "Parameters": which CNI_* variables each command requires.
_REQUIRED: dict[str, tuple[str, ...]] = {
    "ADD": ("CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"),
    "CHECK": ("CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"),
    "DEL": ("CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"),
    "GC": ("CNI_PATH",),
    "STATUS": ("CNI_PATH",),
    "VERSION": (),
}

# SPEC.md: container ID and network name: an alphanumeric, then alphanumerics, '_', '.', '-'.
# (A character set, not a regex: `re` costs milliseconds of start-up on every exec.)
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_NAME_CHARS = _ALNUM | frozenset("_.-")
# A network name becomes a directory name (and part of libcni's cache file name): keep it well
# under the 255 bytes a file name may have. (Container IDs have no such limit: long ones are
# hashed into the marker's file name.)
MAX_NETWORK = 200
# Linux IFNAMSIZ is 16 bytes with the terminating NUL.
MAX_IFNAME_BYTES = 15


class Invocation:
    """What the runtime told us through the environment."""

    __slots__ = ("args", "cni_path", "command", "container_id", "ifname", "netns")

    def __init__(
        self, command: str, container_id: str, netns: str, ifname: str, cni_path: str, args: str
    ) -> None:
        self.command = command
        self.container_id = container_id
        self.netns = netns
        self.ifname = ifname
        self.cni_path = cni_path
        self.args = args


def valid_name(value: str) -> bool:
    """Container IDs and network names (SPEC.md)."""
    return bool(value) and value[0] in _ALNUM and all(c in _NAME_CHARS for c in value)


def valid_network(value: str) -> bool:
    """Network names: the spec's character set, and short enough to be a directory name."""
    return len(value) <= MAX_NETWORK and valid_name(value)


def valid_ifname(value: str) -> bool:
    """Interface names (SPEC.md): 1-15 bytes, not '.' or '..', no '/', ':' or whitespace."""
    if value in ("", ".", ".."):
        return False
    try:
        if len(value.encode("utf-8", "surrogateescape")) > MAX_IFNAME_BYTES:
            return False
    except UnicodeError:
        return False
    return not any(c in "/:" or c.isspace() or not c.isprintable() for c in value)


def parse_env(environ: Mapping[str, str]) -> Invocation:
    """Read CNI_*; raise one CniError (code 4) naming every missing or invalid variable."""
    command = environ.get("CNI_COMMAND", "")
    if not command:
        raise errors.CniError(errors.INVALID_ENV, "required env variables [CNI_COMMAND] missing")
    if command not in _REQUIRED:
        raise errors.CniError(errors.INVALID_ENV, f"unknown CNI_COMMAND {command!r}")
    missing = [k for k in _REQUIRED[command] if not environ.get(k)]
    if missing:
        raise errors.CniError(
            errors.INVALID_ENV, f"required env variables [{','.join(missing)}] missing"
        )
    inv = Invocation(
        command=command,
        container_id=environ.get("CNI_CONTAINERID", ""),
        netns=environ.get("CNI_NETNS", ""),
        ifname=environ.get("CNI_IFNAME", ""),
        cni_path=environ.get("CNI_PATH", ""),
        args=environ.get("CNI_ARGS", ""),
    )
    _check_identifiers(inv)
    return inv


def _check_identifiers(inv: Invocation) -> None:
    bad = []
    if inv.container_id and not valid_name(inv.container_id):
        bad.append("CNI_CONTAINERID")
    if inv.ifname and not valid_ifname(inv.ifname):
        bad.append("CNI_IFNAME")
    if bad:
        raise errors.CniError(
            errors.INVALID_ENV,
            f"invalid env variables [{','.join(bad)}]",
            "container ID: alphanumeric first, then alphanumerics, '_', '.', '-'; "
            "interface name: 1-15 bytes, not '.' or '..', no '/', ':' or whitespace",
        )


def read_stdin(stream: BinaryIO, limit: int = MAX_STDIN) -> bytes:
    """Read the network config, refusing more than `limit` bytes (code 6)."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise errors.CniError(
            errors.DECODING_FAILURE, f"network configuration exceeds {limit} bytes"
        )
    return data
