"""`cni-delguard bugreport`: one archive with what a maintainer asks for first.

A tar.gz whose members have fixed names under `cni-delguard-bugreport/` (MEMBERS): the versions,
`doctor`, `assess`, `stats` and `list` as JSON (each run here, read-only, with its exit code and
stderr), the last N records of the decision log, the conf dir's listing, its confs and the
guard's own entries, the installer's records, and, in the installer's pod, its heartbeat; with
`--installer-log FILE` a saved `kubectl logs` of the installer too. `manifest.json` says what each
member holds, which were cut at the bound and what could not be read.

Bounded: each member at most MEMBER_LIMIT bytes and the whole at most TOTAL_LIMIT (before
compression), a member cut at its bound says so in the manifest; the log is read from its last
LOG_TAIL bytes only. Redacted (ops/redact.py): every other plugin's fields by name only unless
`--include-plugin-config`, and whatever looks like a secret everywhere, that flag or not.

Every node path is taken through `--root`: the dirs doctor finds (the node's own links resolved
inside the root, as the node resolves them: NodeRoot.located), then opened one component at a
time from the root without following any link (a link is listed, never read through), each file
read no-follow and bounded (fsutil.read_regular).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import platform
import stat
import tarfile
import time

from cni_delguard import buildinfo
from cni_delguard.cni import errors
from cni_delguard.host import layouts
from cni_delguard.host.root import NodeRoot
from cni_delguard.node import confdir, options
from cni_delguard.ops import redact
from cni_delguard.ops.logread import parse
from cni_delguard.ops.text import clean
from cni_delguard.state import fsutil
from cni_delguard.tooling import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

PREFIX = "cni-delguard-bugreport"
MEMBERS = (
    "manifest.json", "versions.json", "doctor.json", "assess.json", "stats.json",
    "markers.json", "log.jsonl", "conf-dir.json", "confs.json", "guard-conf.json",
    "installer.json", "installer-log.txt",
)
MEMBER_LIMIT = 2 * 1024 * 1024
TOTAL_LIMIT = 8 * 1024 * 1024
LOG_TAIL = 4 * 1024 * 1024
CONF_LIMIT = 1024 * 1024  # fsops.MAX_CONF: what the installer itself reads of a conf
MAX_CONFS = 64  # conf files read (by name); a conf dir holds a handful, the rest are listed
DEFAULT_RECORDS, MAX_RECORDS = 500, 20000
LIVE_FILE = "/run/cni-delguard/live"  # the chart's --live-file: there, this runs in its pod


class Archive:
    """The members, in the order added, each cut at its share of the bounds."""

    def __init__(self) -> None:
        self.members: dict[str, bytes] = {}
        self.notes: dict[str, dict[str, Any]] = {}
        self.about: dict[str, Any] = {}  # manifest.json's other fields
        self.size = 0

    def add(self, name: str, data: bytes, **note: Any) -> None:
        room = max(0, min(MEMBER_LIMIT, TOTAL_LIMIT - self.size))
        cut = len(data) > room
        self.members[name] = data[:room]
        self.size += len(self.members[name])
        self.notes[name] = {"bytes": len(self.members[name]), "cut": cut, **note}

    def add_json(self, name: str, value: Any, **note: Any) -> None:
        self.add(name, _json(value), **note)

    def tar_gz(self, mtime: int) -> bytes:
        """manifest.json first, then the members by name; the same mtime, owner and mode for
        each, so only what was found differs between two reports."""
        manifest = _json({"limits": {"memberBytes": MEMBER_LIMIT, "totalBytes": TOTAL_LIMIT,
                                     "logTailBytes": LOG_TAIL}, "members": self.notes,
                          **self.about})
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name, data in [("manifest.json", manifest), *sorted(self.members.items())]:
                info = tarfile.TarInfo(f"{PREFIX}/{name}")
                info.size, info.mtime, info.mode = len(data), mtime, 0o600
                info.uname = info.gname = "root"
                tar.addfile(info, io.BytesIO(data))
        return gzip.compress(raw.getvalue(), mtime=mtime)


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True, allow_nan=False) + "\n").encode()


# Reading under the root without following a link.


class Under:
    """The node's files under `root`, reached one component at a time without following a
    link; `problems` collects what could not be read (path -> why)."""

    def __init__(self, root: str) -> None:
        self.node = NodeRoot(root)
        self.root = self.node.path
        self.problems: dict[str, str] = {}

    def on_node(self, path: str) -> str:
        """`path` (seen from here) as the node names it; UsageError when not under the root."""
        node_path = self.node.on_node(path)
        if node_path is None:
            raise UsageError(f"{path} is not under --root {self.root}")
        return node_path

    def open_dir(self, path: str) -> int:
        """A descriptor of the dir `path` (seen from here), through the host floor's walk."""
        return self.node.open_dir(self.on_node(path))

    def read(self, path: str, limit: int) -> bytes | None:
        """A regular file's bytes (at most `limit`), or None with the reason kept."""
        try:
            return self.node.read(self.on_node(path), limit)
        except (OSError, UsageError) as exc:
            self._problem(path, exc)
            return None

    def tail(self, path: str, size: int) -> bytes | None:
        """The last `size` bytes of a regular file, from a line's start (None: not there)."""
        try:
            fd = self.open_dir(os.path.dirname(path))
            try:
                f = os.open(os.path.basename(path),
                            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
            finally:
                os.close(fd)
        except (OSError, UsageError) as exc:
            self._problem(path, exc)
            return None
        try:
            st = os.fstat(f)
            if not stat.S_ISREG(st.st_mode):
                self.problems[path] = "not a regular file"
                return None
            start = max(0, st.st_size - size)
            data = os.pread(f, size, start)
        finally:
            os.close(f)
        if start > 0:
            data = data[data.find(b"\n") + 1:] if b"\n" in data else b""
        return data

    def listing(self, path: str) -> list[dict[str, Any]] | None:
        """Each entry of a dir: name, kind, size, mode, owner, mtime (a link's target shown,
        never followed)."""
        try:
            fd = self.open_dir(path)
        except (OSError, UsageError) as exc:
            self._problem(path, exc)
            return None
        try:
            entries = []
            for name in sorted(os.listdir(fd)):
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                entry = {"name": clean(name), "kind": _kind(st.st_mode), "size": st.st_size,
                         "mode": f"{stat.S_IMODE(st.st_mode):04o}", "uid": st.st_uid,
                         "gid": st.st_gid, "mtime": int(st.st_mtime)}
                if stat.S_ISLNK(st.st_mode):
                    entry["target"] = redact.text(clean(os.readlink(name, dir_fd=fd)))
                entries.append(entry)
            return entries
        finally:
            os.close(fd)

    def _problem(self, path: str, exc: Exception) -> None:
        if isinstance(exc, FileNotFoundError):
            self.problems[path] = "not there"
        elif isinstance(exc, OSError):
            self.problems[path] = clean(exc.strerror or exc)
        else:
            self.problems[path] = clean(exc)


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "dir"), (stat.S_ISLNK, "link")):
        if test(mode):
            return kind
    return "other"


# What goes in.


def tools(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    """One read-only operator command, run here: its exit code, its JSON, stderr (not yet
    redacted: the caller reads doctor's paths from it as they are)."""
    from cni_delguard.ops import assess, doctor, listing, stats
    from cni_delguard.tooling import Parser

    out, err = io.StringIO(), io.StringIO()
    parser = Parser(prog="cni-delguard", out=err, err=err)
    sub = parser.add_subparsers(dest="command")
    for module in (doctor, assess, stats, listing):
        module.register(sub)
    where = ["--root", args.root, "--layout", args.layout]
    try:
        parsed = parser.parse_args([argv[0], *where, *argv[1:]])
        code = parsed.run(parsed, out, err)
    except (UsageError, OSError, errors.CniError, ValueError) as exc:
        code, err = 2, io.StringIO(f"cni-delguard {argv[0]}: {clean(exc)}\n")
    try:
        body: Any = json.loads(out.getvalue()) if out.getvalue() else None
    except ValueError:
        body = out.getvalue()
    return {"command": argv, "exitCode": code, "output": body, "stderr": err.getvalue()[-65536:]}


def log_records(under: Under, log_file: str, count: int) -> list[dict[str, Any]]:
    """The last `count` records of the decision log (its `.1` before it when needed), each
    redacted; a line that is no record is skipped."""
    newest = _records_in(under, log_file)
    older = _records_in(under, log_file + ".1") if len(newest) < count else []
    kept = (older + newest)[-count:] if count else []
    return [redact.secrets(r) for r in kept]


def _records_in(under: Under, name: str) -> list[dict[str, Any]]:
    data = under.tail(name, LOG_TAIL)
    if data is None:
        return []
    return [r for line in data.split(b"\n") if line.strip() and (r := parse(line)) is not None]


def confs(under: Under, conf_dir: str, entries: list[dict[str, Any]] | None,
          include: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each conf file of the conf dir as the report carries it, and the guard's own entries."""
    found: dict[str, Any] = {}
    guard: dict[str, Any] = {}
    wanted = [e for e in entries or []
              if e["kind"] == "file" and e["name"].endswith(confdir.EXTENSIONS)]
    for entry in wanted[:MAX_CONFS]:
        name = entry["name"]
        data = under.read(os.path.join(conf_dir, name), CONF_LIMIT)
        if data is None:
            continue
        try:
            conf = json.loads(data)
        except ValueError:
            found[name] = {"unparsed": True, "bytes": len(data)}
            continue
        found[name] = redact.conf(conf, include)
        own = _guard_entries(conf)
        if own:
            guard[name] = [redact.conf(e, include) for e in own]
    return found, guard


def _guard_entries(conf: Any) -> list[Any]:
    if not isinstance(conf, dict):
        return []
    plugins = conf.get("plugins")
    if not isinstance(plugins, list):
        plugins = [conf]
    return [p for p in plugins if isinstance(p, dict) and p.get("type") == redact.GUARD_TYPE]


def versions() -> dict[str, Any]:
    u = os.uname()
    return {"cniDelguard": buildinfo.info(), "kernel": {"release": u.release,
            "machine": u.machine}, "python": platform.python_version()}


def collect(args: argparse.Namespace, now: float) -> Archive:
    archive = Archive()
    under = Under(args.root)
    archive.add_json("versions.json", versions())
    doctor = tools(args, ["doctor", "--json"])
    archive.add_json("doctor.json", redact.secrets(doctor))
    for name, argv in (("assess.json", ["assess", "--output", "json"]),
                       ("stats.json", ["stats", "--json", "--last", "50"]),
                       ("markers.json", ["list", "--json"])):
        archive.add_json(name, redact.secrets(tools(args, argv)))
    paths = _paths(args, doctor.get("output"))
    records = log_records(under, paths["logFile"], args.log_records) if paths["logFile"] else []
    archive.add("log.jsonl", b"".join(_json_line(r) for r in records), records=len(records))
    listing = under.listing(paths["confDir"])
    archive.add_json("conf-dir.json", {"path": paths["confDir"], "entries": listing})
    found, guard = confs(under, paths["confDir"], listing, args.include_plugin_config)
    archive.add_json("confs.json", found, pluginConfig=args.include_plugin_config)
    archive.add_json("guard-conf.json", guard)
    archive.add_json("installer.json", installer(under, paths["stateDir"], args.live_file))
    if args.installer_log:
        archive.add("installer-log.txt", _installer_log(args.installer_log))
    archive.about["unread"] = under.problems
    archive.about["made"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    return archive


def _json_line(value: Any) -> bytes:
    return (json.dumps(value, sort_keys=True, allow_nan=False) + "\n").encode()


def _paths(args: argparse.Namespace, doctor: Any) -> dict[str, str]:
    """The conf dir, state dir and log file under the root: doctor's (from the conf the
    runtime uses and the guard's entry in it), else the layout's."""
    paths = {k: doctor.get(k) for k in ("confDir", "stateDir", "logFile")} if isinstance(
        doctor, dict) else {}
    if not all(isinstance(v, str) for v in paths.values()) or len(paths) < 3:
        try:
            row = layouts.choose(args.root, args.layout, ("conf_dir", "state_dir", "log_file"))
        except (layouts.NoLayoutError, UsageError):
            row = layouts.STANDARD
        node = NodeRoot(args.root)
        paths = {"confDir": node.located(row.conf_dir),
                 "stateDir": node.here(row.state_dir),
                 "logFile": node.here(row.log_file)}
    return {k: v or "" for k, v in paths.items()}


def installer(under: Under, state_dir: str, live_file: str) -> dict[str, Any]:
    """The installer's records (names, sizes, times; the uninstall stamp) and, in its pod,
    the watcher's heartbeat."""
    records = os.path.join(state_dir, "installer")
    stamp = under.read(os.path.join(records, "uninstalled"), 256)
    live: Any = None
    if os.path.lexists(live_file):
        try:
            data = fsutil.read_regular(None, live_file, 65536).data
            live = redact.secrets(json.loads(data))
        except (OSError, ValueError) as exc:
            live = {"unread": clean(exc)}
    return {"records": under.listing(records),
            "uninstalled": stamp.decode("ascii", "replace").strip() if stamp else None,
            "heartbeat": live}


def _installer_log(path: str) -> bytes:
    """A saved `kubectl logs` of the installer: its last MEMBER_LIMIT bytes, each line
    redacted. A file the operator names, read without following a final link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return f"unread: {clean(exc.strerror or exc)}\n".encode()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b"unread: not a regular file\n"
        size = os.fstat(fd).st_size
        data = os.pread(fd, MEMBER_LIMIT, max(0, size - MEMBER_LIMIT))
    finally:
        os.close(fd)
    lines = data.decode("utf-8", "replace").splitlines()
    return "".join(redact.text(clean(line)) + "\n" for line in lines).encode()


# The command.

SUMMARY = "write one archive with what a bug report needs (secrets redacted)"
DESCRIPTION = (
    "One tar.gz (at most 8 MiB before compression) with the versions, doctor, assess, stats "
    "and list as JSON, the last N decision log records, the conf dir's listing and confs, the "
    "guard's own conf and the installer's records. Other plugins' fields are listed by name "
    "only, and anything that looks like a token, password, key or certificate is redacted. "
    "Attach it to the bug report; look inside first (tar -xzf)."
)


def register(sub: Any) -> None:
    """Add `bugreport` to cni_delguard.cli's subcommands."""
    parser = options.command(sub, "bugreport", run, SUMMARY, DESCRIPTION)
    options.add(parser, "root")
    layouts.add_option(parser)
    parser.add_argument("--output", "-o", required=True, metavar="FILE",
                        help="where to write the archive (made anew, mode 0600); `-`: stdout, "
                        "e.g. from `kubectl exec` in the installer's pod")
    parser.add_argument("--log-records", type=_records, default=DEFAULT_RECORDS, metavar="N",
                        help=f"the last N decision log records (%(default)s; at most "
                        f"{MAX_RECORDS})")
    parser.add_argument("--include-plugin-config", action="store_true",
                        help="keep other plugins' field values too (secrets are still redacted)")
    parser.add_argument("--installer-log", metavar="FILE",
                        help="a saved `kubectl logs` of the installer's pod, to add")
    parser.add_argument("--live-file", default=LIVE_FILE, metavar="PATH",
                        help="the watcher's heartbeat, added when it is there: run in the "
                        "installer's pod (%(default)s)")


def _records(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = -1
    if not 0 <= n <= MAX_RECORDS:
        raise argparse.ArgumentTypeError(f"a count from 0 to {MAX_RECORDS}")
    return n


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    if not os.path.isdir(args.root):
        stderr.write(f"cni-delguard bugreport: --root {clean(args.root)} is not a directory\n")
        return 2
    now = time.time()
    data = collect(args, now).tar_gz(int(now))
    if args.output == "-":
        stdout.flush()
        stdout.buffer.write(data)
        stdout.buffer.flush()
        return 0
    try:
        fd = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        stderr.write(f"cni-delguard bugreport: cannot write {clean(args.output)}: "
                     f"{clean(exc.strerror or exc)}\n")
        return 2
    try:
        fsutil.write_all(fd, data)
    finally:
        os.close(fd)
    stderr.write(f"cni-delguard bugreport: wrote {clean(args.output)} ({len(data)} bytes); "
                 "look inside before you attach it\n")
    return 0
