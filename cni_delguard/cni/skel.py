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


# Kubernetes' own rules (k8s.io/apimachinery/pkg/util/validation): a namespace is a DNS-1123
# label, a pod name a DNS-1123 subdomain. Character sets again, not `re` (start-up).
_LOWER_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_LABEL_CHARS = _LOWER_ALNUM | frozenset("-")
_HEX = frozenset("0123456789abcdefABCDEF")
MAX_DNS_LABEL = 63
MAX_DNS_SUBDOMAIN = 253
# CNI_ARGS keys the runtime sets for a Kubernetes pod (containerd, CRI-O), and our names for them.
POD_ARGS = {"K8S_POD_NAMESPACE": "namespace", "K8S_POD_NAME": "name", "K8S_POD_UID": "uid"}
# CNI_ARGS is a few hundred bytes from a real runtime; anything past this is not worth a look.
MAX_ARGS = 64 * 1024


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


def _label_part(value: str) -> bool:
    return (
        bool(value)
        and value[0] in _LOWER_ALNUM
        and value[-1] in _LOWER_ALNUM
        and all(c in _LABEL_CHARS for c in value)
    )


def valid_dns_label(value: str) -> bool:
    """A namespace: 1-63 of [a-z0-9-], alphanumeric at both ends."""
    return len(value) <= MAX_DNS_LABEL and _label_part(value)


def valid_dns_subdomain(value: str) -> bool:
    """A pod name: at most 253 characters, dot-separated parts each like a label."""
    return len(value) <= MAX_DNS_SUBDOMAIN and all(_label_part(p) for p in value.split("."))


def valid_uid(value: str) -> bool:
    """A pod UID: a UUID (8-4-4-4-12 hex digits), or the 32 hex digits the kubelet gives a static
    pod (an MD5 of its manifest, kubelet/config/common.go)."""
    if len(value) == 32:
        return all(c in _HEX for c in value)
    if len(value) != 36 or any(value[i] != "-" for i in (8, 13, 18, 23)):
        return False
    return all(c in _HEX for i, c in enumerate(value) if i not in (8, 13, 18, 23))


_POD_CHECKS = {"namespace": valid_dns_label, "name": valid_dns_subdomain, "uid": valid_uid}


def pod_identity(args: str) -> dict[str, str]:
    """The pod's namespace, name and UID from CNI_ARGS (`K=V;K=V`), each only when valid.

    Other keys (IgnoreUnknown, K8S_POD_INFRA_CONTAINER_ID ...) are ignored. A key given twice is
    ambiguous and dropped, as is any value Kubernetes would not accept: these values go into
    file contents and log lines, never raw."""
    if len(args) > MAX_ARGS:
        return {}
    seen: dict[str, str | None] = {}
    for pair in args.split(";"):
        key, sep, value = pair.partition("=")
        field = POD_ARGS.get(key)
        if field is None or not sep:
            continue
        seen[field] = None if field in seen else value
    found = {}
    for field, check in _POD_CHECKS.items():
        given = seen.get(field)
        if given is not None and check(given):
            found[field] = given
    return found


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
