"""Attachments stuck behind a strict DEL that keeps failing, found in the decision log (for
`doctor`), each with the exact `cni-delguard release` command that would free it.

Pure: it takes the log's records as parsed (dicts, oldest first, e.g. `<logFile>.1` then
`<logFile>`) and the time to judge them at, and reads nothing itself. A failing strict DEL is a
DEL line with decision `forward-strict` and an `error`; any later DEL line for the attachment
without an error (forwarded, skipped or released) ends its streak. Values from the log are
validated before they are returned or put in a command: the log is a file anyone with root may
have edited.
"""

from __future__ import annotations

import calendar
import time

from cni_delguard.cni import skel
from cni_delguard.guard import defaults
from cni_delguard.ops import logread, text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

# The kubelet retries a failing StopPodSandbox every few seconds to minutes: ten minutes of
# failures is no blip, and a runtime or daemon restart has usually happened by then.
DEFAULT_THRESHOLD = 600.0
MIN_FAILURES = 2
MAX_ERROR = 500
_TS = "%Y-%m-%dT%H:%M:%SZ"


class Stuck:
    """One attachment whose strict DEL failed `failures` times from `since` to `last`."""

    def __init__(self, network: str, container_id: str, ifname: str, since: float) -> None:
        self.network, self.container_id, self.ifname = network, container_id, ifname
        self.since = self.last = since
        self.failures = 0
        self.pod: str | None = None
        self.pod_uid: str | None = None
        self.last_error: dict[str, object] = {}
        self.command = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "network": self.network,
            "containerID": self.container_id,
            "ifname": self.ifname,
            "pod": self.pod,
            "podUID": self.pod_uid,
            "failures": self.failures,
            "since": _stamp(self.since),
            "last": _stamp(self.last),
            "lastError": self.last_error,
            "command": self.command,
        }


class Streaks:
    """The failing streaks, fed one record at a time (the watcher's metrics feed the records
    as the log grows; `find_stuck` feeds a whole log). At most `limit` streaks are kept: past it
    the oldest is dropped, so a log full of distinct failing attachments cannot grow it."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self.streaks: dict[tuple[str, str, str], Stuck] = {}

    def add(self, rec: Mapping[str, object]) -> None:
        key, at = _attachment(rec), _epoch(rec.get("ts"))
        if key is None or at is None:
            return
        error = rec.get("error")
        if rec.get("decision") == "forward-strict" and isinstance(error, dict):
            streak = self.streaks.get(key)
            if streak is None:
                if len(self.streaks) >= self.limit:
                    del self.streaks[next(iter(self.streaks))]
                streak = self.streaks[key] = Stuck(*key, since=at)
            _failed(streak, rec, error, at)
        elif "error" not in rec:
            self.streaks.pop(key, None)  # the DEL went through: not stuck (any more)

    def stuck(
        self, now: float, threshold: float = DEFAULT_THRESHOLD, min_failures: int = MIN_FAILURES
    ) -> list[Stuck]:
        """The streaks of at least `min_failures` failures, the first of them at least
        `threshold` seconds before `now`; oldest first."""
        found = [
            s
            for s in self.streaks.values()
            if s.failures >= min_failures and now - s.since >= threshold
        ]
        return sorted(found, key=lambda s: (s.since, s.network, s.container_id, s.ifname))


def find_stuck(
    records: Iterable[Mapping[str, object]],
    now: float,
    threshold: float = DEFAULT_THRESHOLD,
    min_failures: int = MIN_FAILURES,
    root: str = "/",
    state_dir: str | None = None,
) -> list[Stuck]:
    """The attachments whose strict DEL failed at least `min_failures` times in a row, the
    first of them at least `threshold` seconds before `now`; oldest first."""
    streaks = Streaks()
    for rec in records:
        streaks.add(rec)
    found = streaks.stuck(now, threshold, min_failures)
    for s in found:
        s.command = release_command(s, root, state_dir)
    return found


def release_command(stuck: Stuck, root: str = "/", state_dir: str | None = None) -> str:
    """The command line that releases exactly this attachment, quoted for a POSIX shell
    (`--state-dir` only when it is not the default)."""
    argv: list[str] = []
    if state_dir is not None and state_dir != defaults.STATE_DIR:
        argv += ["--state-dir", state_dir]
    argv += ["--container", stuck.container_id, "--ifname", stuck.ifname]
    argv += ["--network", stuck.network]
    argv += ["--reason", f"strict DEL failing since {_stamp(stuck.since)}; leak accepted"]
    return text.command("release", root, *argv)


def _attachment(rec: Mapping[str, object]) -> tuple[str, str, str] | None:
    """(network, containerID, ifname) of a DEL line, when all three are valid identifiers."""
    if rec.get("command") != "DEL":
        return None
    net, cid, ifname = rec.get("network"), rec.get("containerID"), rec.get("ifname")
    if not (isinstance(net, str) and isinstance(cid, str) and isinstance(ifname, str)):
        return None
    if skel.valid_network(net) and skel.valid_name(cid) and skel.valid_ifname(ifname):
        return net, cid, ifname
    return None


def _failed(streak: Stuck, rec: Mapping[str, object], error: dict[str, object], at: float) -> None:
    streak.failures += 1
    streak.since, streak.last = min(streak.since, at), max(streak.last, at)
    streak.last_error = {
        "code": logread.error_code(error.get("code")),
        "msg": _printable(logread.text(error.get("msg")) or "")[:MAX_ERROR],
    }
    pod, uid = rec.get("pod"), rec.get("podUID")
    if isinstance(pod, str):
        ns, _, name = pod.partition("/")
        if skel.valid_dns_label(ns) and skel.valid_dns_subdomain(name):
            streak.pod = pod
    if isinstance(uid, str) and skel.valid_uid(uid):
        streak.pod_uid = uid


def _printable(text: str) -> str:
    """The delegate's message without control characters (they would reach a terminal)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _epoch(ts: object) -> float | None:
    if not isinstance(ts, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(ts, _TS)))
    except ValueError:
        return None


def _stamp(at: float) -> str:
    return time.strftime(_TS, time.gmtime(at))
