"""`cni-delguard release`: an operator's word that an attachment's DEL may succeed even if the
delegate's DEL keeps failing.

After a completed ADD the guard forwards DEL strictly: skipping it would leak real state (an IP
address, an interface, the delegate's own records). When that DEL can never succeed (a network
daemon gone for good, multus v4.3.0 stripping kube-ovn's `server_socket` on every DEL), the
sandbox stays stuck. This command writes `<key>.release` beside each matching marker; the next DEL
is still forwarded, and a failure is then logged as `released` and answered with success
(commands/delete.py). The record goes with the marker. Only attachments the guard has a marker
for can be released, and only those that match: nothing else is touched.
"""

from __future__ import annotations

import argparse
import os
import time

from cni_delguard.cni import errors, skel
from cni_delguard.host import layouts
from cni_delguard.node import options
from cni_delguard.ops.text import clean
from cni_delguard.state import store
from cni_delguard.state.locking import AttachmentLock
from cni_delguard.tooling import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

# A DEL in flight holds the attachment's lock while its delegate runs: wait a while, not forever.
LOCK_TIMEOUT = 10.0
DEFAULT_REASON = "no reason given"


class Target:
    """What the operator asked for: a container (maybe one ifname/network) or a pod."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.container: str | None = args.container
        self.pod: tuple[str, str] | None = args.pod
        self.ifname: str | None = args.ifname
        self.network: str | None = args.network

    def describe(self) -> str:
        parts = [f"--container {self.container}" if self.container else ""]
        parts.append(f"--pod {self.pod[0]}/{self.pod[1]}" if self.pod else "")
        parts.append(f"--ifname {self.ifname}" if self.ifname else "")
        parts.append(f"--network {self.network}" if self.network else "")
        return " ".join(p for p in parts if p)

    def matches(self, key: str, body: dict[str, object]) -> bool:
        cid, ifname = body.get("containerID"), body.get("ifname")
        if not isinstance(cid, str) or not isinstance(ifname, str):
            return False
        # Trust only a marker that names the attachment its file is keyed by.
        if store.attachment_key(cid, ifname) != key:
            return False
        if self.container is not None and cid != self.container:
            return False
        if self.ifname is not None and ifname != self.ifname:
            return False
        if self.pod is not None:
            pod = body.get("pod")
            return isinstance(pod, dict) and (pod.get("namespace"), pod.get("name")) == self.pod
        return True


class Match:
    __slots__ = ("body", "key", "network")

    def __init__(self, network: str, key: str, body: dict[str, object]) -> None:
        self.network, self.key, self.body = network, key, body

    def line(self, verb: str) -> str:
        """One line for the terminal: every value shown was validated (or is left out)."""
        b = self.body
        state = b.get("state") if b.get("state") in ("attempted", "completed", "deleting") else "?"
        return (
            f"{verb} network {self.network} container {b['containerID']} ifname {b['ifname']} "
            f"pod {_pod_of(b)} (marker {state})"
        )


def _pod_of(body: dict[str, object]) -> str:
    pod = body.get("pod")
    if not isinstance(pod, dict):
        return "-"
    ns, name = str(pod.get("namespace")), str(pod.get("name"))
    return f"{ns}/{name}" if skel.valid_dns_label(ns) and skel.valid_dns_subdomain(name) else "-"


def find(state_dir: str, target: Target) -> tuple[list[Match], list[tuple[str, str]]]:
    """The markers under state_dir that match, read without following any symlink, and (path,
    why) of each network dir skipped by the rule every reader shares (store.network_dirs): an
    odd dir elsewhere never keeps an attachment in a healthy one from being released."""
    found: list[Match] = []
    skipped: list[tuple[str, str]] = []
    try:
        for d in store.network_dirs(state_dir):
            if target.network is not None and d.name != target.network:
                continue
            if d.fd is None:
                skipped.append((d.path, d.skipped or ""))
                continue
            for name in sorted(os.listdir(d.fd)):
                if name.startswith(".") or not name.endswith(store.MARKER_SUFFIX):
                    continue
                key = name[: -len(store.MARKER_SUFFIX)]
                body = store.marker_body(d.fd, key)
                if target.matches(key, body) and _printable(body):
                    found.append(Match(d.name, key, body))
    except FileNotFoundError:
        return [], []  # no state dir: the guard has seen no ADD
    return found, skipped


def _printable(body: dict[str, object]) -> bool:
    """A matched marker's identifiers are shown on the terminal: only spec-valid ones."""
    return skel.valid_name(str(body["containerID"])) and skel.valid_ifname(str(body["ifname"]))


def release(state_dir: str, match: Match, reason: str) -> bool:
    """Write the release record under the attachment's lock; False when the marker went
    meanwhile (a DEL finished: nothing is left to release)."""
    record = {
        "reason": reason,
        "time": round(time.time(), 3),
        "uid": os.getuid(),
        "containerID": match.body["containerID"],
        "ifname": match.body["ifname"],
        "network": match.network,
    }
    with store.MarkerStore(state_dir, match.network, create=False) as markers:
        lock_file = store.lock_path(state_dir, match.network, match.key)
        with AttachmentLock(lock_file, LOCK_TIMEOUT) as lock:
            if not markers.body(match.key):
                lock.remove()  # the lock file this very call created
                return False
            markers.put_release(match.key, record)
    return True


SUMMARY = "let a stuck attachment's next DEL succeed although its delegate fails"
DESCRIPTION = (
    "Record, for the matching attachments only, that the next DEL may succeed "
    "even if the delegate's DEL fails. The DEL is still forwarded; a failure is logged as "
    "'released' with REASON and the delegate's error. What the delegate fails to delete "
    "leaks (IP addresses, interfaces, its own state): see docs/runbooks.md, "
    "'Releasing a sandbox whose DEL keeps failing'."
)


def register(sub: Any) -> None:
    """Add `release` to cni_delguard.cli's subcommands."""
    parser = options.command(sub, "release", run, SUMMARY, DESCRIPTION)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--container", type=_container, metavar="ID", help="a container ID")
    which.add_argument("--pod", type=_pod, metavar="NS/NAME", help="every attachment of a pod")
    parser.add_argument("--ifname", type=_ifname, metavar="IF", help="only this interface")
    parser.add_argument("--network", type=_network, metavar="NET", help="only this network")
    parser.add_argument(
        "--reason",
        type=_reason,
        default=DEFAULT_REASON,
        metavar="TEXT",
        help=f"why (one line, at most {store.MAX_REASON} printable characters): recorded with "
        "your uid and the time in the release record beside each marker, and in the decision "
        "log's `released` line of the DEL it lets succeed (default: %(default)r)",
    )
    parser.add_argument("--dry-run", action="store_true", help="show what would be released")
    options.add(parser, "root")
    layouts.add_option(parser)
    options.add(parser, "state_dir", state_dir={"type": _absolute})


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        state_dir = layouts.guard_path(args, "state_dir")
    except UsageError as exc:
        err.write(f"cni-delguard release: {clean(exc)}\n")
        return 2
    target = Target(args)
    try:
        matches, skipped = find(state_dir, target)
        err.writelines(
            f"cni-delguard release: skipped {clean(path)}: {clean(why)}\n" for path, why in skipped
        )
        if not matches:
            err.write(
                f"cni-delguard release: no attachment in {state_dir} matches "
                f"{target.describe()}: nothing released\n"
            )
            return 2
        if args.dry_run:
            out.writelines(m.line("would release") + "\n" for m in matches)
            out.write("dry run: nothing written\n")
            return 0
        done = [m for m in matches if release(state_dir, m, args.reason)]
    except (errors.CniError, OSError) as exc:
        why = exc.msg if isinstance(exc, errors.CniError) else str(exc)
        err.write(f"cni-delguard release: {why}\n")
        return 1
    out.writelines(m.line("released") + "\n" for m in done)
    if not done:
        err.write("cni-delguard release: every match was deleted meanwhile: nothing released\n")
        return 2
    return 0


def _checked(check: Any, what: str) -> Any:
    def parse(value: str) -> str:
        if not check(value):
            raise argparse.ArgumentTypeError(f"invalid {what} {value!r}")
        return value

    return parse


_container = _checked(skel.valid_name, "container ID")
_ifname = _checked(skel.valid_ifname, "interface name")
_network = _checked(skel.valid_network, "network name")
_absolute = _checked(lambda v: v.startswith("/") and "\0" not in v, "absolute path")


def _pod(value: str) -> tuple[str, str]:
    ns, _, name = value.partition("/")
    if not (skel.valid_dns_label(ns) and skel.valid_dns_subdomain(name)):
        raise argparse.ArgumentTypeError(
            f"invalid pod {value!r}: NAMESPACE/NAME as Kubernetes spells them"
        )
    return ns, name


def _reason(value: str) -> str:
    if len(value) > store.MAX_REASON or not value.isprintable():
        raise argparse.ArgumentTypeError(
            f"a reason is at most {store.MAX_REASON} printable characters, on one line"
        )
    return value
