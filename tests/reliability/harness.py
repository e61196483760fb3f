"""The reliability bench: a CNI bin dir with the guard under test and the fakes, state under tmp.

A `Bench` is made per test. The guard runs as a real process from its bin dir (the frozen binary
by default, the package with DELGUARD_UNDER_TEST=package; tests/support/guard.py) and each exec is
reaped with os.wait4, so its peak RSS is measured. Everything lives under the test's tmp_path.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.confs import guard_conf, stale_delegate
from tests.support.fakes import install_fake
from tests.support.guard import install_guard
from tests.support.paths import widen
from tests.support.records import fake_calls, guard_log

STATES = ("attempted", "completed", "deleting")
NETNS = "/var/run/netns/reliability-fake"  # the fakes never enter it; ADD only needs it set


@dataclass(frozen=True)
class Run:
    """One finished guard exec: what the runtime saw, and what it cost."""

    rc: int
    stdout: bytes
    stderr: bytes
    maxrss_kb: int
    wall_s: float

    def error(self) -> dict[str, Any]:
        body = json.loads(self.stdout)
        assert isinstance(body, dict), self.describe()
        return body

    def describe(self) -> str:
        return (f"rc={self.rc} stdout={self.stdout[:400]!r} stderr={self.stderr[-1500:]!r} "
                f"rss={self.maxrss_kb}kB wall={self.wall_s:.2f}s")


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
    except BrokenPipeError:
        pass  # the guard refused oversized stdin and closed it
    finally:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass


def reap(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int, int]:
    """(exit code, peak RSS in kB) via wait4; SIGKILL the process when `timeout` runs out."""
    timer = threading.Timer(timeout, _kill_quietly, (proc.pid,))
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss


def _kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Spawner:
    """The client of spawner.py: one per test process, shared by all threads."""

    _instance: Spawner | None = None
    _made = threading.Lock()

    def __init__(self) -> None:
        script = Path(__file__).with_name("spawner.py")
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", str(script)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lock = threading.Lock()
        self.waiting: dict[int, tuple[threading.Event, dict[str, Any]]] = {}
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    @classmethod
    def get(cls) -> Spawner:
        with cls._made:
            if cls._instance is None or cls._instance.proc.poll() is not None:
                cls._instance = cls()
            return cls._instance

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            body = json.loads(line)
            with self.lock:
                event, slot = self.waiting.pop(body["id"])
            slot.update(body)
            event.set()

    def call(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        event, slot = threading.Event(), {}
        with self.lock:
            self.next_id += 1
            request["id"] = self.next_id
            self.waiting[self.next_id] = (event, slot)
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        if not event.wait(timeout + 30):
            raise AssertionError(f"spawner gave no answer for {request['argv']}")
        assert "error" not in slot, slot["error"]
        return slot


def run_argv(argv: list[str], env: dict[str, str], stdin: bytes, timeout: float = 60) -> Run:
    """Run a process to the end through the spawner: exit code, output and its own peak RSS."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dg-run-") as tmp:
        paths = {name: os.path.join(tmp, name) for name in ("stdin", "stdout", "stderr")}
        Path(paths["stdin"]).write_bytes(stdin)
        env_out = {k: os.fsdecode(os.fsencode(v)) for k, v in env.items()}
        reply = Spawner.get().call({"argv": argv, "env": env_out, "timeout": timeout} | paths,
                                   timeout)
        return Run(reply["rc"], Path(paths["stdout"]).read_bytes(),
                   Path(paths["stderr"]).read_bytes(), reply["maxrss_kb"],
                   time.monotonic() - start)


@dataclass
class Started:
    """A guard exec running in the background; `finish` reaps it into a Run."""

    proc: subprocess.Popen[bytes]
    out: Any
    err: Any
    began: float

    @classmethod
    def launch(cls, argv: list[str], env: dict[str, str], stdin: bytes) -> Started:
        # Closed by finish(): the guard outlives this call.
        out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # noqa: SIM115
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=out, stderr=err)
        _feed(proc, stdin)
        return cls(proc, out, err, time.monotonic())

    @property
    def pid(self) -> int:
        return self.proc.pid

    def finish(self, timeout: float = 60) -> Run:
        rc, rss = reap(self.proc, timeout)
        wall = time.monotonic() - self.began
        self.out.seek(0)
        self.err.seek(0)
        run = Run(rc, self.out.read(), self.err.read(), rss, wall)
        self.out.close()
        self.err.close()
        return run

    def kill(self) -> int:
        """SIGKILL and reap; the exit code (negative signal number)."""
        _kill_quietly(self.proc.pid)
        return self.finish().rc


@dataclass
class Bench:
    root: Path
    prefix: list[str] = field(default_factory=list)  # e.g. `ip netns exec <outer>`
    netns: str = NETNS  # CNI_NETNS of ADD/CHECK/DEL
    started: list[Started] = field(default_factory=list)

    def __post_init__(self) -> None:
        for sub in ("bin", "log", "results", "multus", "fake-state", "gates", "victim"):
            (self.root / sub).mkdir(mode=0o755, parents=True, exist_ok=True)
        self.state_dir.mkdir(mode=0o700, exist_ok=True)
        install_guard(self.bin_dir)
        install_fake(self.bin_dir)
        install_fake(self.bin_dir, "gated", "gated_delegate.py")
        install_fake(self.bin_dir, "broken", "broken_delegate.py")
        widen(self.bin_dir)  # the bench keeps state and logs under the temp dir

    # -- paths ---------------------------------------------------------------------------------
    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def log_file(self) -> Path:
        return self.root / "log" / "delguard.log"

    @property
    def gate_dir(self) -> Path:
        return self.root / "gates"

    @property
    def fake_state(self) -> Path:
        return self.root / "fake-state"

    @property
    def record(self) -> Path:
        return self.root / "record.jsonl"

    def net_dir(self, network: str = "net1") -> Path:
        return self.state_dir / "networks" / network

    # -- configs -------------------------------------------------------------------------------
    def gated(self, **knobs: Any) -> dict[str, Any]:
        return stale_delegate(self.fake_state, self.record, "gated",
                              gateDir=str(self.gate_dir)) | knobs

    def broken(self, mode: str, **knobs: Any) -> dict[str, Any]:
        return {"type": "broken", "misbehave": mode, "recordFile": str(self.record),
                "pidDir": str(self.gate_dir)} | knobs

    def conf(self, delegate: dict[str, Any] | None = None, network: str = "net1",
             version: str = "1.0.0", **extra: Any) -> dict[str, Any]:
        conf = guard_conf(
            delegate if delegate is not None else self.gated(),
            network=network,
            version=version,
            state_dir=self.state_dir,
            result_cache_dirs=[self.root / "results"],
            multus_cache_dirs=[self.root / "multus"],
            log_file=self.log_file,
            logLevel="debug",
            timeouts={"add": 20, "del": 20, "check": 20, "gc": 20, "status": 10},
        )
        return conf | extra

    def env(self, command: str, cid: str = "c1", ifname: str = "eth0") -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "LANG": "C.UTF-8",
               "CNI_COMMAND": command, "CNI_PATH": str(self.bin_dir)}
        for key, value in (("CNI_CONTAINERID", cid), ("CNI_IFNAME", ifname),
                           ("CNI_NETNS", self.netns)):
            if value and command not in ("GC", "STATUS", "VERSION"):
                env[key] = value
        return env

    # -- running the guard ---------------------------------------------------------------------
    def argv(self) -> list[str]:
        return [*self.prefix, str(self.bin_dir / "cni-delguard")]

    def run(self, command: str, conf: dict[str, Any] | bytes, cid: str = "c1",
            ifname: str = "eth0", timeout: float = 60) -> Run:
        data = conf if isinstance(conf, bytes) else json.dumps(conf).encode()
        return run_argv(self.argv(), self.env(command, cid, ifname), data, timeout)

    def start(self, command: str, conf: dict[str, Any], cid: str = "c1",
              ifname: str = "eth0") -> Started:
        """Start the guard without waiting for it (stdin fed, stdout/stderr to temp files)."""
        run = Started.launch(self.argv(), self.env(command, cid, ifname),
                             json.dumps(conf).encode())
        self.started.append(run)
        return run

    def cleanup(self) -> None:
        """Kill every guard this bench started and every fake process still running from it."""
        for run in self.started:
            _kill_quietly(run.pid)
        pids = [int(p.read_text() or 0) for p in self.gate_dir.glob("*.pid") if p.is_file()]
        pids += [r["pid"] for r in self.records()]
        for pid in pids:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if str(self.root).encode() in cmdline or cmdline.startswith(b"sleep"):
                _kill_quietly(pid)

    # -- inspection ----------------------------------------------------------------------------
    def records(self, command: str | None = None, phase: str = "start") -> list[dict[str, Any]]:
        return [r for r in fake_calls(self.record, command) if r.get("phase", "start") == phase]

    def fake_holds(self, cid: str = "c1", ifname: str = "eth0") -> bool:
        return (self.fake_state / f"{cid}:{ifname}").exists()

    def entries(self, network: str = "net1") -> list[str]:
        ndir = self.net_dir(network)
        return sorted(os.listdir(ndir)) if ndir.is_dir() else []

    def log_lines(self) -> list[dict[str, Any]]:
        return guard_log(self.log_file)


def add_then_del_reach_the_delegate(bench: Bench) -> Run:
    """An ADD that the delegate completes, then its DEL forwarded strictly: both answered as
    the spec says, the delegate called for each, nothing of the attachment left. The ADD's run."""
    conf = bench.conf()
    add = bench.run("ADD", conf)
    assert add.rc == 0, add.describe()
    result = json.loads(add.stdout)
    assert "code" not in result and result.get("cniVersion") == "1.0.0", add.describe()
    assert bench.fake_holds()
    delete = bench.run("DEL", conf)
    assert (delete.rc, delete.stdout) == (0, b""), delete.describe()
    assert [r["command"] for r in bench.records()] == ["ADD", "DEL"]
    assert not bench.fake_holds()
    assert attachment_files(bench.entries(), "c1") == []
    assert [line["decision"] for line in bench.log_lines() if line["command"] == "DEL"] == [
        "forward-strict"
    ]
    return add


def attachment_files(entries: list[str], cid: str, ifname: str = "eth0") -> list[str]:
    """The names in a network dir that belong to one attachment (marker, lock, temp files)."""
    key = f"{cid}:{ifname}"
    return [n for n in entries if n in (f"{key}.json", f"{key}.lock")
            or n.startswith(f".{key}.json.")]


def marker_problems(state_dir: Path) -> list[str]:
    """Every marker must be whole JSON with a known state, 0600, a regular file owned by us."""
    problems = []
    root = state_dir / "networks"
    if not root.is_dir():
        return problems
    for path in sorted(root.glob("*/*.json")):
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o600:
            problems.append(f"{path.name}: mode {st.st_mode:o}")
            continue
        try:
            body = json.loads(path.read_bytes())
        except ValueError as exc:
            problems.append(f"{path.name}: not JSON ({exc})")
            continue
        if not isinstance(body, dict) or body.get("state") not in STATES:
            problems.append(f"{path.name}: unknown content {body!r}")
    return problems


def tree(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple[int, int, int]]:
    """relpath -> (mode, size, mtime_ns) of everything under root, not descending into `skip`."""
    out: dict[str, tuple[int, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d not in skip]
        for name in [*dirnames, *filenames]:
            st = (here / name).lstat()
            out[str((here / name).relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out
