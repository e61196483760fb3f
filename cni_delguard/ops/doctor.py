"""`cni-delguard doctor`: what is wrong on this node, and what the guard will do about it.

Each check is a small function `check(node) -> list[Finding]`, independent of the others; CHECKS
lists them in the order they are reported (one more check is one more line there). A finding is
`ok`, `info` or a `problem`; a problem that is safe to fix carries its repair, which runs only
with `--repair` and says what it did. Nothing here touches a valid libcni result or a marker:
the repairs are orphaned lock files (removed under their flock) and invalid libcni caches (moved
to `<stateDir>/quarantine/`, never deleted). Exit 0: healthy; 1: problems left; 2: usage.
"""

from __future__ import annotations

import functools
import json
import os
import stat
import time
from dataclasses import dataclass, field

from cni_delguard import PLUGIN_TYPE
from cni_delguard.cni import errors
from cni_delguard.cni.skel import valid_name
from cni_delguard.guard import defaults, evidence
from cni_delguard.node import bundle, confdir, options, patch
from cni_delguard.node.errors import InstallerError
from cni_delguard.ops import scan, stats, stuck
from cni_delguard.ops.logread import LogError, LogReader
from cni_delguard.ops.text import age, as_json, clean
from cni_delguard.state import fsutil
from cni_delguard.state.marker import ATTEMPTED, CORRUPT
from cni_delguard.tooling import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any, TextIO

OK, INFO, PROBLEM = "ok", "info", "problem"
QUARANTINE = "quarantine"
# libcni writes its cache in place: a file this young may be a write in progress, not torn.
SETTLE_SECONDS = 60
LAST_BREAKS = 5
MAX_TIMEOUT = 86400


@dataclass
class Finding:
    check: str
    severity: str
    message: str
    path: str | None = None
    repair: Callable[[], str] | None = None
    repaired: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "severity": self.severity,
            "message": self.message,
            "path": self.path,
            "repairable": self.repair is not None,
            "repaired": self.repaired,
        }


@dataclass
class Node:
    """Where things are on the node (under --root), from the conf the runtime uses."""

    root: str
    conf_dir: str
    bin_dir: str
    conf_path: str | None = None
    conf: dict[str, Any] | None = None
    conf_error: str | None = None
    guard: dict[str, Any] | None = None
    state_dir: str = ""
    result_dirs: tuple[str, ...] = ()
    multus_dirs: tuple[str, ...] = ()
    log_file: str = ""
    add_timeout: float = defaults.TIMEOUTS["add"]
    now: float = field(default_factory=time.time)

    def under(self, path: str) -> str:
        return options.under(self.root, path)


def discover(root: str, conf_dir: str, bin_dir: str) -> Node:
    node = Node(root, "", "")
    node.conf_dir, node.bin_dir = node.under(conf_dir), node.under(bin_dir)
    names = _conf_names(node.conf_dir)
    if names:
        node.conf_path = os.path.join(node.conf_dir, names[0])
        node.conf, node.conf_error = _read_conf(node.conf_path)
    if node.conf is not None and node.conf_path is not None:
        entries = patch.guard_plugins(node.conf, confdir.is_list(node.conf_path))
        node.guard = entries[0] if entries else None
    keys = node.guard or {}
    node.state_dir = node.under(_path(keys.get("stateDir"), defaults.STATE_DIR))
    node.result_dirs = tuple(
        node.under(d) for d in _paths(keys.get("resultCacheDirs"), defaults.RESULT_CACHE_DIRS)
    )
    node.multus_dirs = tuple(
        node.under(d) for d in _paths(keys.get("multusCacheDirs"), defaults.MULTUS_CACHE_DIRS)
    )
    log_file = keys.get("logFile", defaults.LOG_FILE)
    log_file = _path(log_file, defaults.LOG_FILE) if log_file != "" else ""
    node.log_file = node.under(log_file) if log_file else ""
    timeouts = keys.get("timeouts")
    add = timeouts.get("add") if isinstance(timeouts, dict) else None
    node.add_timeout = _seconds(add) or node.add_timeout
    return node


def _seconds(value: object) -> float | None:
    """A timeout from the conf: a positive number of seconds, a day at most (NaN, 1e999 and a
    400-digit integer are not; the comparison comes first, so float() never overflows)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 < value <= MAX_TIMEOUT else None


def _conf_names(conf_dir: str) -> list[str]:
    """The conf files in the order the runtime (and the installer) reads them."""
    try:
        return confdir.conf_files(conf_dir)
    except (InstallerError, OSError):
        return []


def _read_conf(path: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        data = fsutil.read_at(None, path, 4 * 1024 * 1024)
    except OSError as exc:
        return None, f"cannot read it: {exc.strerror or exc}"
    if data is None:
        return None, "not a regular file (a symlink?)"
    try:
        conf = json.loads(data)
    except (ValueError, RecursionError) as exc:
        return None, f"not valid JSON: {exc}"
    return (conf, None) if isinstance(conf, dict) else (None, "not a JSON object")


def _path(value: object, default: str) -> str:
    """An absolute path from the conf, normalized as the guard reads it (`/../x` is /x)."""
    if isinstance(value, str) and value.startswith("/") and "\0" not in value:
        return os.path.normpath(value)
    return default


def _paths(value: object, default: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(p for v in value if (p := _path(v, "")))
    return default


# --- the checks --------------------------------------------------------------------------------


def check_conf(node: Node) -> list[Finding]:
    """Is the conf the runtime uses (first by name) wrapped by the guard?"""
    if node.conf_path is None:
        return [Finding("conf", PROBLEM, f"no CNI conf in {node.conf_dir}", node.conf_dir)]
    name = os.path.basename(node.conf_path)
    if node.conf_error is not None:
        return [Finding("conf", PROBLEM, f"{name}: {node.conf_error}", node.conf_path)]
    if node.guard is None:
        return [
            Finding(
                "conf",
                PROBLEM,
                f"{name}, the conf the runtime uses, is not wrapped by "
                "cni-delguard: run `cni-delguard install`",
                node.conf_path,
            )
        ]
    delegate = node.guard.get("delegate")
    dtype = delegate.get("type") if isinstance(delegate, dict) else None
    found = [
        Finding("conf", OK, f"{name} (first by name) is wrapped around {dtype!r}", node.conf_path)
    ]
    if node.guard.get("mode") == defaults.OBSERVE:
        found.append(
            Finding(
                "conf",
                INFO,
                "observe mode: every DEL is forwarded; the log says "
                "what the guard would have decided",
                node.conf_path,
            )
        )
    return found


def check_plugins(node: Node) -> list[Finding]:
    """Do the guard's binary and the plugin it wraps exist, and does the guard run?"""
    if node.guard is None:
        return []
    guard = os.path.join(node.bin_dir, PLUGIN_TYPE)
    found = [_runs(guard)]
    delegate = node.guard.get("delegate")
    dtype = delegate.get("type") if isinstance(delegate, dict) else None
    if not isinstance(dtype, str) or not valid_name(dtype):
        found.append(Finding("plugins", PROBLEM, f"the delegate's type {dtype!r} is not a plugin"))
    elif not os.access(os.path.join(node.bin_dir, dtype), os.X_OK):
        found.append(
            Finding(
                "plugins",
                PROBLEM,
                f"the delegate {dtype!r} is not an executable "
                f"in {node.bin_dir}: every ADD will fail",
                os.path.join(node.bin_dir, dtype),
            )
        )
    else:
        found.append(Finding("plugins", OK, f"the delegate {dtype!r} is in {node.bin_dir}"))
    return found


def _runs(path: str) -> Finding:
    if not os.access(path, os.X_OK):
        return Finding(
            "plugins",
            PROBLEM,
            f"{path} is missing or not executable: run `cni-delguard install`",
            path,
        )
    versions, why = bundle.answers_version(path)
    if versions is None:
        return Finding("plugins", PROBLEM, why, path)
    return Finding("plugins", OK, f"{path} runs (CNI versions {', '.join(map(str, versions))})")


def check_state_dir(node: Node) -> list[Finding]:
    """Is the state dir ours alone (owner, mode, not a symlink)?"""
    try:
        os.close(fsutil.open_dir(node.state_dir))
    except FileNotFoundError:
        return [
            Finding(
                "state",
                INFO,
                f"{node.state_dir} does not exist yet (the first ADD through the guard creates it)",
                node.state_dir,
            )
        ]
    except errors.CniError as exc:
        return [
            Finding(
                "state", PROBLEM, f"{exc.msg}: every ADD fails until it is fixed", node.state_dir
            )
        ]
    except OSError as exc:
        return [
            Finding("state", PROBLEM, f"{node.state_dir}: {exc.strerror or exc}", node.state_dir)
        ]
    return [Finding("state", OK, f"{node.state_dir} is safe (owned by us, not writable by others)")]


def check_markers(node: Node) -> list[Finding]:
    """Markers `attempted` for longer than the ADD timeout (an ADD that died), unreadable ones."""
    found = []
    for m in _markers(node):
        where = f"{m.network} {m.container_id or m.key} {m.ifname}".rstrip()
        pod = f" (pod {m.pod_name()})" if m.pod_name() else ""
        marker_age = m.age(node.now)
        if m.state == ATTEMPTED and marker_age is not None and marker_age > node.add_timeout:
            found.append(
                Finding(
                    "markers",
                    PROBLEM,
                    f"{where}{pod}: ADD attempted "
                    f"{age(marker_age)} ago and never completed (an ADD that died); "
                    "the guard forwards its DEL and ignores a failure",
                    m.path,
                )
            )
        elif m.state == CORRUPT:
            found.append(
                Finding(
                    "markers",
                    PROBLEM,
                    f"{where}{pod}: marker unreadable; the "
                    "guard forwards its DEL and ignores a failure",
                    m.path,
                )
            )
    return found


def _markers(node: Node) -> list[scan.Marker]:
    try:
        return scan.markers(node.state_dir)
    except (OSError, errors.CniError):
        return []  # check_state_dir reports why


def check_locks(node: Node) -> list[Finding]:
    """Lock files held now, or left with no marker and no holder (orphaned: removable)."""
    try:
        locks = scan.lock_files(node.state_dir)
    except (OSError, errors.CniError):
        return []
    found = []
    for lock in locks:
        held = scan.lock_held(lock.path)
        if held:
            found.append(
                Finding(
                    "locks",
                    INFO,
                    f"{lock.network} {lock.key}: held by an operation "
                    f"running now (since {age(node.now - lock.mtime)} at most)",
                    lock.path,
                )
            )
        elif held is False and not lock.has_marker:
            found.append(
                Finding(
                    "locks",
                    PROBLEM,
                    f"{lock.network} {lock.key}: orphaned lock file (no marker, no holder)",
                    lock.path,
                    repair=functools.partial(scan.remove_orphaned_lock, lock),
                )
            )
    return found


def check_multus_only(node: Node) -> list[Finding]:
    """multus caches with no libcni result and no marker: sandboxes whose ADD failed or never
    finished, which the guard now frees (their DEL is forwarded, a failure ignored)."""
    results = _result_names(node)
    marked = {m.container_id for m in _markers(node)}
    found = []
    for d in node.multus_dirs:
        for cid in _regular_files(d):
            if not valid_name(cid) or cid in marked:
                continue
            if any(f"-{cid}-" in name for name in results):
                continue
            found.append(
                Finding(
                    "multus",
                    PROBLEM,
                    f"sandbox {cid}: multus cache with no libcni "
                    "result (its ADD failed or never finished); the guard forwards "
                    "its DEL and ignores a failure, so the runtime can remove it",
                    os.path.join(d, cid),
                )
            )
    return found


def check_result_caches(node: Node) -> list[Finding]:
    """libcni result files that are empty or not a libcni cache of a result."""
    found = []
    for d in node.result_dirs:
        for name in _entries(d):
            path = os.path.join(d, name)
            try:
                st = os.lstat(path)
                data = fsutil.read_at(None, path, evidence.MAX_RESULT_CACHE)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) or evidence.is_libcni_result(data or b""):
                continue
            why = "empty" if data == b"" else "a symlink" if data is None else "not a libcni result"
            settled = node.now - st.st_mtime >= SETTLE_SECONDS
            found.append(
                Finding(
                    "libcni",
                    PROBLEM,
                    f"{name}: libcni cache {why}; the guard treats its ADD as at "
                    "most attempted (DEL forwarded, a failure ignored)",
                    path,
                    repair=functools.partial(quarantine, node, d, name) if settled else None,
                )
            )
    return found


def quarantine(node: Node, directory: str, name: str) -> str:
    """Move an invalid libcni cache into <stateDir>/quarantine (same file system: a rename)."""
    root = fsutil.open_dir(node.state_dir, create=True)
    try:
        qdir = os.path.join(node.state_dir, QUARANTINE)
        qfd = fsutil.open_subdir(root, QUARANTINE, qdir, create=True)
    finally:
        os.close(root)
    try:
        src = os.path.join(directory, name)
        target = f"{name}.{int(node.now)}"
        n = 0
        while os.path.lexists(os.path.join(qdir, target)):
            n += 1
            target = f"{name}.{int(node.now)}.{n}"
        os.rename(src, target, dst_dir_fd=qfd)
    except OSError as exc:
        return f"left in place: {exc.strerror or exc}"
    finally:
        os.close(qfd)
    return f"moved to {os.path.join(qdir, target)}"


def check_log(node: Node) -> list[Finding]:
    """The last deadlock breaks in the log, each with the delegate's error."""
    if not node.log_file:
        return [Finding("log", INFO, 'the decision log is turned off (logFile "")')]
    try:
        tally, malformed = stats.read(node.log_file)
    except LogError as exc:
        return [Finding("log", INFO, str(exc), node.log_file)]
    found = [
        Finding(
            "log",
            INFO,
            f"{len(tally.breaks)} deadlock breaks in the log (DELs the "
            "delegate failed, answered with success)",
            node.log_file,
        )
    ]
    for b in tally.breaks[-LAST_BREAKS:]:
        err = b["delegateError"]
        pod = f" pod {b['pod']}" if b.get("pod") else ""
        found.append(
            Finding(
                "log",
                INFO,
                f"{b['ts']} {b['network']} {b['containerID']} "
                f"{b['ifname']}{pod}: delegate error {err['code']}: {err['msg']}",
            )
        )
    if malformed:
        found.append(Finding("log", INFO, f"{malformed} malformed lines in the log", node.log_file))
    return found


def check_stuck(node: Node) -> list[Finding]:
    """Strict DELs failing again and again for longer than stuck.DEFAULT_THRESHOLD: a completed
    ADD the guard will not free by itself, each with the `release` command that would."""
    if not node.log_file:
        return []
    try:
        records = list(LogReader(node.log_file))
    except LogError:
        return []  # check_log says why
    keys = node.guard or {}
    state_dir = _path(keys.get("stateDir"), defaults.STATE_DIR)
    found = []
    for s in stuck.find_stuck(records, node.now, root=node.root, state_dir=state_dir):
        pod = f" (pod {s.pod})" if s.pod else ""
        err = s.last_error
        found.append(
            Finding(
                "stuck",
                PROBLEM,
                f"{s.network} {s.container_id} {s.ifname}{pod}: {s.failures} strict DELs failed "
                f"since {s.as_dict()['since']}, last delegate error {err.get('code')}: "
                f"{err.get('msg')}. Repair the delegate, or accept the leak with: {s.command}",
                node.log_file,
            )
        )
    return found


def _result_names(node: Node) -> list[str]:
    return [n for d in node.result_dirs for n in _entries(d)]


def _entries(d: str) -> list[str]:
    try:
        return sorted(os.listdir(d))
    except OSError:
        return []


def _regular_files(d: str) -> list[str]:
    return [
        n
        for n in _entries(d)
        if os.path.isfile(os.path.join(d, n)) and not os.path.islink(os.path.join(d, n))
    ]


CHECKS: list[Callable[[Node], list[Finding]]] = [
    check_conf,
    check_plugins,
    check_state_dir,
    check_markers,
    check_locks,
    check_multus_only,
    check_result_caches,
    check_log,
    check_stuck,
]


def examine(node: Node, repair: bool) -> list[Finding]:
    findings = [f for check in CHECKS for f in check(node)]
    if repair:
        for f in findings:
            if f.severity == PROBLEM and f.repair is not None:
                try:
                    f.repaired = f.repair()
                except (OSError, errors.CniError) as exc:
                    f.repaired = f"failed: {exc}"
    return findings


def _left(f: Finding) -> bool:
    """A problem still there after --repair (a repair that left the file in place counts)."""
    return f.severity == PROBLEM and not (f.repaired or "").startswith(("removed", "moved"))


SUMMARY = "check this node and say what the guard will do"
DESCRIPTION = (
    "What is wrong on this node (conf, plugin, state dir, markers, locks, "
    "caches, the log) and what the guard will do about it. Exit 0: healthy; 1: problems. "
    "--repair fixes only what is safe to fix and says what it did."
)


def register(sub: Any) -> None:
    """Add `doctor` to cni_delguard.cli's subcommands."""
    parser = options.command(sub, "doctor", run, SUMMARY, DESCRIPTION)
    options.add(parser, "root", "conf_dir", "bin_dir", "json")
    parser.add_argument(
        "--repair",
        action="store_true",
        help="fix what is safe: remove orphaned lock files, move invalid libcni caches to "
        "<stateDir>/quarantine (never deleted)",
    )


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    if not os.path.isdir(args.root):
        stderr.write(f"cni-delguard doctor: --root {clean(args.root)} is not a directory\n")
        return 2
    try:
        node = discover(args.root, args.conf_dir, args.bin_dir)
    except UsageError as exc:
        stderr.write(f"cni-delguard doctor: {clean(exc)}\n")
        return 2
    findings = examine(node, args.repair)
    healthy = not any(_left(f) for f in findings)
    if args.json:
        body = {"root": args.root, "healthy": healthy, "findings": [f.as_dict() for f in findings]}
        stdout.write(as_json(body))
    else:
        stdout.write("\n".join(_text(node, findings, healthy)) + "\n")
    return 0 if healthy else 1


def _text(node: Node, findings: list[Finding], healthy: bool) -> list[str]:
    lines = [
        f"cni-delguard doctor: conf dir {clean(node.conf_dir)}, state dir {clean(node.state_dir)}"
    ]
    for f in findings:
        lines.append(f"  {f.severity.upper():8s} {f.check:8s} {clean(f.message)}")
        if f.repaired is not None:
            lines.append(f"  {'':8s} {'':8s} repaired: {clean(f.repaired)}")
        elif f.repair is not None:
            lines.append(f"  {'':8s} {'':8s} (--repair fixes this)")
    problems = sum(f.severity == PROBLEM for f in findings)
    left = sum(_left(f) for f in findings)
    lines.append(
        "healthy"
        if healthy and not problems
        else f"{problems} problems, {problems - left} repaired"
        if healthy
        else f"{left} problems"
    )
    return lines
