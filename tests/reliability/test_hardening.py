"""Issue 12: hostile config paths, full disks, signals and the delegate's process.

Each test runs the guard as a real process (the frozen binary by default) and would fail on the
guard before the fix it guards (named in each docstring). Faults are made with real mechanisms:
FIFOs, chown, sparse files, a tiny tmpfs filled up, a read-only remount, real signals, a pipe
whose reader is gone, a delegate file held open for writing (ETXTBSY), a seccomp filter (pidfd_open
failing), a PID namespace (a predictable PID).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability import mounts
from tests.reliability.harness import Bench, Run, attachment_files, run_argv
from tests.reliability.procs import Gates, is_dead, wait_dead
from tests.support.guard import under_test
from tests.support.waiting import wait_for

IO_FAILURE, INVALID_CONFIG, TRY_AGAIN = 5, 7, 11
KUBE_OVN_MSG = "server_socket is required in cni.conf"  # the gated fake's DEL without state
MIB = 1024 * 1024


def no_traceback(run: Run) -> None:
    assert b"Traceback" not in run.stderr, run.describe()
    assert b"Exception ignored" not in run.stderr, run.describe()


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- logFile: what the guard finds there ---------------------------------------------------------
def _fifo(bench: Bench) -> None:
    os.mkfifo(bench.log_file, 0o600)


def _foreign_owner(bench: Bench) -> None:
    bench.log_file.write_bytes(b"someone else's\n")
    os.chown(bench.log_file, 65534, 65534)


def _symlink(bench: Bench) -> None:
    bench.log_file.symlink_to(bench.root / "victim" / "precious")


def _big_foreign(bench: Bench) -> None:
    """Over the rotation size, ours by owner and mode, but not a log the guard wrote."""
    with bench.log_file.open("wb") as f:
        f.write(b"root's own data\n")
        f.truncate(11 * MIB)
    bench.log_file.chmod(0o600)


def _hard_link(bench: Bench) -> None:
    """A guard-looking file with a second name elsewhere: appending would change that one."""
    bench.log_file.write_bytes(b'{"ts": "2026-01-01T00:00:00Z"}\n')
    bench.log_file.chmod(0o600)
    os.link(bench.log_file, bench.root / "victim" / "linked")


HOSTILE_LOGS = {
    "fifo": _fifo,
    "foreign-owner": _foreign_owner,
    "symlink": _symlink,
    "big-foreign": _big_foreign,
    "hard-link": _hard_link,
}


def _log_snapshot(bench: Bench) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(bench.log_file.parent.iterdir()) + sorted((bench.root / "victim").iterdir()):
        st = path.lstat()
        body = path.read_bytes()[:64] if stat.S_ISREG(st.st_mode) else None
        out[str(path)] = (st.st_mode, st.st_uid, st.st_size, body)
    return out


@pytest.mark.parametrize("command", ["DEL", "ADD"])
@pytest.mark.parametrize("kind", list(HOSTILE_LOGS))
def test_hostile_log_file_is_left_alone(bench: Bench, kind: str, command: str) -> None:
    """Before the fix a FIFO blocked even the DEL skip path forever (killed here after 30 s),
    a foreign-owned file or a hard link was appended to, a big foreign file renamed to `.1`.
    Now: the operation succeeds, nothing there changes, and stderr says why there is no log."""
    (bench.root / "victim" / "precious").write_bytes(b"precious\n")
    HOSTILE_LOGS[kind](bench)
    before = _log_snapshot(bench)
    run = bench.run(command, bench.conf(), timeout=30)
    assert run.rc == 0, run.describe()
    assert run.stdout == b"" if command == "DEL" else json.loads(run.stdout)["cniVersion"]
    assert b"cannot write log" in run.stderr, run.describe()
    no_traceback(run)
    assert _log_snapshot(bench) == before
    if command == "ADD":
        assert bench.run("DEL", bench.conf(), timeout=30).rc == 0


FIRST_RECORD = b'{"ts": "2026-01-01T00:00:00Z", "level": "info"}\n'


def _big_own_log(bench: Bench, dot_one: bytes) -> Path:
    """A log of the guard's own past the 10 MiB rotation size, and `<log>.1` holding `dot_one`;
    returns the path of `.1`."""
    with bench.log_file.open("wb") as f:
        f.write(FIRST_RECORD)
        f.truncate(11 * MIB)
    bench.log_file.chmod(0o600)
    old = bench.log_file.with_name(bench.log_file.name + ".1")
    old.write_bytes(dot_one)
    return old


def test_own_big_log_is_rotated(bench: Bench) -> None:
    """The guard's own log past 10 MiB is still rotated (one generation), replacing its own .1."""
    old = _big_own_log(bench, dot_one=FIRST_RECORD)
    old.chmod(0o600)
    run = bench.run("DEL", bench.conf())
    assert (run.rc, run.stderr) == (0, b""), run.describe()
    assert old.stat().st_size > 11 * MIB
    assert not bench.log_file.exists() or bench.log_file.stat().st_size == 0


def test_foreign_dot_one_is_not_replaced_by_a_rotation(bench: Bench) -> None:
    old = _big_own_log(bench, dot_one=b"not a log of the guard\n")
    run = bench.run("DEL", bench.conf())
    assert run.rc == 0, run.describe()
    assert old.read_bytes() == b"not a log of the guard\n"
    assert bench.log_file.stat().st_size > 11 * MIB  # appended to, not rotated


# -- the path rule -------------------------------------------------------------------------------
@contextlib.contextmanager
def outside_place() -> Iterator[Path]:
    """A directory outside every allowed prefix (under /var/cache); removed afterwards."""
    place = Path("/var/cache") / f"cni-delguard-test-{uuid.uuid4().hex[:12]}"
    try:
        yield place
    finally:
        shutil.rmtree(place, ignore_errors=True)


@pytest.mark.parametrize("key", ["stateDir", "logFile"])
def test_paths_outside_the_allowed_places_are_refused(bench: Bench, key: str) -> None:
    """Before the fix ADD created /var/cache/<x>/... (any path a NAD's author chose). Now ADD
    fails with code 7 before anything is made; the DEL skip path neither logs there nor fails."""
    with outside_place() as place:
        target = place / ("state" if key == "stateDir" else "x.log")
        conf = bench.conf(**{key: str(target)})
        add = bench.run("ADD", conf)
        assert add.rc == 1, add.describe()
        assert add.error()["code"] == INVALID_CONFIG, add.describe()
        assert "outside the allowed places" in add.error()["details"], add.describe()
        assert bench.records() == []
        delete = bench.run("DEL", conf)
        assert (delete.rc, delete.stdout) == (0, b""), delete.describe()
        no_traceback(delete)
        assert not place.exists(), "the guard created something outside the allowed places"


@pytest.fixture
def etc_dir() -> Iterator[Path]:
    """/etc/profile.d as the session sees it, with a fresh tmpfs over it for the test: what a
    guard writes there through a link (the fault this guards against) lands in the tmpfs of the
    session's private mount namespace (tests/support/hostdefaults.py), never on the host."""
    from tests.support import hostdefaults

    isolated = str(hostdefaults._Host.isolated)
    if not isolated.startswith("private"):
        pytest.skip(f"the session is not in a private mount namespace: {isolated}")
    target = Path("/etc/profile.d")
    if not target.is_dir():
        pytest.skip("no /etc/profile.d on this machine")
    mounts.mount("-t", "tmpfs", "-o", "mode=0755,size=1m", "delguard-etc", str(target))
    try:
        yield target
    finally:
        mounts.umount(target)


def _reach_etc_through_a_link(bench: Bench, etc: Path, owner: str) -> Path:
    """A dir under the temp dir (widened for the bench, as an admin widens it) holding `link`,
    a symlink into /etc: made by root, or by a local user (uid 65534) in a dir of their own."""
    place = bench.root / "tmp-of-a-user"
    place.mkdir(mode=0o755)
    (place / "link").symlink_to(etc)
    if owner == "user":
        os.chown(place / "link", 65534, 65534, follow_symlinks=False)
        os.chown(place, 65534, 65534)
    return place / "link"


NAD_PATHS = {
    "logFile": lambda link: {"logFile": str(link / "sub" / "x.sh")},
    "stateDir": lambda link: {"stateDir": str(link / "state")},
}


@pytest.mark.parametrize("owner", ["root", "user"])
@pytest.mark.parametrize("key", list(NAD_PATHS))
def test_a_nad_config_reaching_etc_through_a_link_creates_nothing_there(
    bench: Bench, etc_dir: Path, key: str, owner: str
) -> None:
    """Issue 38, item 1: every component of `logFile` and `stateDir` is walked without following
    a link (fsutil.walk). On 20ffe12 an ADD with `logFile` <tmp>/link/sub/x.sh, `link` pointing
    at a dir under /etc, made the guard create sub/ and x.sh there, and `stateDir` through such a
    link got state/networks/<name>; the DEL of the logFile case did the same. Now ADD fails (code
    5) before anything is made and DEL succeeds, its record in the default log saying what was
    refused."""
    link = _reach_etc_through_a_link(bench, etc_dir, owner)
    conf = bench.conf(**NAD_PATHS[key](link))
    add = bench.run("ADD", conf)
    no_traceback(add)
    assert add.rc == 1, add.describe()
    assert add.error()["code"] == IO_FAILURE, add.describe()
    assert "symlink" in add.describe() or "owned by uid 65534" in add.describe(), add.describe()
    assert os.listdir(etc_dir) == [], "the guard created something in /etc through a link"
    assert bench.records() == []  # refused before the delegate
    default_log = Path("/var/log/cni-delguard/delguard.log")  # the session's tmpfs
    before = default_log.read_bytes() if default_log.exists() else b""
    delete = bench.run("DEL", conf)
    no_traceback(delete)
    assert (delete.rc, delete.stdout) == (0, b""), delete.describe()
    assert os.listdir(etc_dir) == [], "the guard created something in /etc through a link"
    if key == "logFile":  # the DEL's record went to the default place, saying why
        added = default_log.read_bytes()[len(before):].decode().splitlines()
        [record] = [json.loads(line) for line in added if '"c1"' in line]
        assert record["decision"] == "skip"
        assert record["logFileRefused"]["logFile"] == str(link / "sub" / "x.sh")


def test_the_admin_widens_the_allowed_places(bench: Bench) -> None:
    """cni-delguard.paths beside the plugin (root's, not writable by others) adds places."""
    with outside_place() as place:
        (place / "log").mkdir(mode=0o755, parents=True)  # the admin's places exist
        conf = bench.conf(stateDir=str(place / "state"), logFile=str(place / "log" / "x.log"))
        settings = bench.bin_dir / "cni-delguard.paths"
        settings.write_text(f"# widened for this node\nstate {place}\nlog {place}/log\n")
        settings.chmod(0o666)  # writable by others: ignored
        refused = bench.run("ADD", conf)
        assert refused.rc == 1 and refused.error()["code"] == INVALID_CONFIG, refused.describe()
        settings.chmod(0o644)
        add = bench.run("ADD", conf)
        assert add.rc == 0, add.describe()
        assert stat.S_IMODE((place / "state").stat().st_mode) == 0o700
        assert [r["decision"] for r in _lines(place / "log" / "x.log")] == ["add-completed"]
        assert bench.run("DEL", conf).rc == 0


# -- modes whatever the umask --------------------------------------------------------------------
def _modes(root: Path, top: Path) -> dict[str, str]:
    out = {}
    path = top
    while path != root:
        out[str(path.relative_to(root))] = f"{stat.S_IMODE(path.lstat().st_mode):o}"
        path = path.parent
    return out


def test_guard_under_umask_000_makes_no_open_dir(bench: Bench) -> None:
    """Before the fix the missing parents of stateDir and of logFile's dir were 0777 under
    umask 000 (os.makedirs), the log dir too. Started from this process: the umask is inherited.
    The guard now makes only a leaf (in a place the admin named: the bench's temp dir), never a
    missing parent."""
    state = bench.root / "deep" / "state"
    log = bench.root / "logs" / "x.log"
    (bench.root / "deep").mkdir(mode=0o755)
    old = os.umask(0)
    try:
        run = bench.start("ADD", bench.conf(stateDir=str(state), logFile=str(log))).finish()
    finally:
        os.umask(old)
    assert run.rc == 0, run.describe()
    assert _modes(bench.root, state) == {"deep": "755", "deep/state": "700"}
    assert _modes(bench.root, log) == {"logs": "750", "logs/x.log": "600"}


@pytest.mark.skipif(under_test() == "package", reason="the installer as shipped: frozen only")
def test_installer_under_umask_000_makes_a_state_dir_the_guard_accepts(bench: Bench) -> None:
    """Before the fix `cni-delguard install` made the state dir (and its parents) 0777 under
    umask 000 and the guard refused it: every ADD failed with code 5. Now 0700 (parents 0755)."""
    from tests.installer.conftest import MULTUS_CONF

    root = bench.root / "node"
    conf_dir = root / "etc" / "cni" / "net.d"
    conf_dir.mkdir(parents=True)
    (conf_dir / "00-multus.conf").write_text(MULTUS_CONF)
    (root / "opt" / "cni" / "bin").mkdir(parents=True)
    old = os.umask(0)
    try:
        # The frozen binary installs its own bundle (a wrap needs a plugin there that runs).
        res = subprocess.run([str(bench.bin_dir / "cni-delguard"), "install", "--root", str(root)],
                             capture_output=True, timeout=120, check=False,
                             env={"PATH": os.environ["PATH"]})
    finally:
        os.umask(old)
    assert res.returncode == 0, res.stderr.decode()
    state = root / "var" / "lib" / "cni" / "delguard"
    assert _modes(root, state / "installer") == {
        "var": "755", "var/lib": "755", "var/lib/cni": "755", "var/lib/cni/delguard": "700",
        "var/lib/cni/delguard/installer": "700"}
    add = bench.run("ADD", bench.conf(stateDir=str(state)))
    assert add.rc == 0, add.describe()
    assert bench.run("DEL", bench.conf(stateDir=str(state))).rc == 0


# -- a strict DEL whose delegate fails, on a state fs that cannot be written -----------------------
def _strict_evidence(state: Path) -> Path:
    ndir = state / "networks" / "net1"
    ndir.mkdir(mode=0o700, parents=True)
    os.chmod(state / "networks", 0o700)
    (ndir / "c1:eth0.json").write_text(json.dumps({"state": "completed"}))
    (ndir / "c1:eth0.lock").touch(mode=0o600)
    return ndir


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_strict_del_returns_the_delegates_error_on_a_broken_state_fs(bench: Bench,
                                                                     fault: str) -> None:
    """A completed ADD, then the state fs fills up or goes read-only, and the delegate fails DEL
    (the gated fake without its state: kube-ovn's code 7). Before the fix the runtime got the
    guard's code 5 (putting the old marker back failed too); now the delegate's code and message,
    the marker is still `completed`, and once the fs is usable the next DEL finishes the job."""
    with mounts.tmpfs(bench.root / "mnt", size="256k") as mnt:
        state = mnt / "state"
        state.mkdir(mode=0o700)
        ndir = _strict_evidence(state)
        conf = bench.conf(stateDir=str(state))
        if fault == "full":
            assert mounts.fill(mnt) > 0
        else:
            mounts.remount_ro(mnt)
        run = bench.run("DEL", conf)
        assert run.rc == 1, run.describe()
        assert (run.error()["code"], run.error()["msg"]) == (INVALID_CONFIG, KUBE_OVN_MSG)
        no_traceback(run)
        assert json.loads((ndir / "c1:eth0.json").read_text())["state"] == "completed"
        line = bench.log_lines()[-1]
        assert (line["decision"], line["error"]["code"]) == ("forward-strict", INVALID_CONFIG)
        assert "warning" in line, line
        if fault == "full":
            (mnt / "filler").unlink()
        else:
            subprocess.run(["mount", "-o", "remount,rw", str(mnt)], check=True, timeout=30)
        again = bench.run("DEL", conf)
        assert (again.rc, again.error()["code"]) == (1, INVALID_CONFIG), "strict again"
        bench.fake_state.joinpath("c1:eth0").write_text("{}")  # the delegate can delete now
        last = bench.run("DEL", conf)
        assert (last.rc, last.stdout) == (0, b""), last.describe()
        assert attachment_files(os.listdir(ndir), "c1") == []


def test_strict_del_error_survives_a_marker_that_cannot_be_put_back(bench: Bench) -> None:
    """The `deleting` marker is written, then the state fs fills up while the delegate runs, and
    the delegate fails: putting the `completed` marker back fails. Before the fix the runtime got
    the guard's code 5; now the delegate's code and message, the failure to put the marker back
    is logged, and the next DEL (forwarded, leniently: the marker says `deleting`) succeeds."""
    gates = Gates(bench.gate_dir)
    with mounts.tmpfs(bench.root / "mnt", size="256k") as mnt:
        state = mnt / "state"
        state.mkdir(mode=0o700)
        ndir = _strict_evidence(state)
        held = bench.conf(bench.gated(gates=["DEL:start"]), stateDir=str(state))
        guard = bench.start("DEL", held)
        gates.wait("c1", "DEL", "start")
        assert json.loads((ndir / "c1:eth0.json").read_text())["state"] == "deleting"
        assert mounts.fill(mnt) > 0
        gates.release("c1", "DEL", "start")
        run = guard.finish()
        assert run.rc == 1, run.describe()
        assert (run.error()["code"], run.error()["msg"]) == (INVALID_CONFIG, KUBE_OVN_MSG)
        no_traceback(run)
        line = bench.log_lines()[-1]
        assert "marker not put back" in line["warning"], line
        (mnt / "filler").unlink()
        again = bench.run("DEL", bench.conf(stateDir=str(state)))
        assert (again.rc, again.stdout) == (0, b""), again.describe()
        assert attachment_files(os.listdir(ndir), "c1") == []


# -- a full disk during a log write --------------------------------------------------------------
def test_full_disk_never_leaves_half_a_log_record(bench: Bench) -> None:
    """The log's last page has 40 bytes left and the fs no free block: the next record (~250
    bytes) gets a short write. Before the fix its first 40 bytes stayed, and the next record was
    glued onto them (both lost to a JSON reader). Now the short record is cut back off, stderr
    says so, the DEL still succeeds, and the next record is a line of its own."""
    with mounts.tmpfs(bench.root / "logmnt", size="256k") as mnt:
        log = mnt / "delguard.log"
        head = b'{"ts": "2026-01-01T00:00:00Z", "pad": "'
        tail = b'"}\n'
        log.write_bytes(head + b"x" * (2 * 4096 - 40 - len(head) - len(tail)) + tail)
        log.chmod(0o600)
        conf = bench.conf(logFile=str(log))
        assert mounts.fill(mnt) > 0
        run = bench.run("DEL", conf, "c1")
        assert (run.rc, run.stdout) == (0, b""), run.describe()
        assert b"cannot write log" in run.stderr, run.describe()
        assert log.stat().st_size == 2 * 4096 - 40, "half a record was left in the log"
        (mnt / "filler").unlink()
        assert bench.run("DEL", conf, "c2").rc == 0
        lines = _lines(log)
        assert [line.get("containerID") for line in lines] == [None, "c2"]


# -- CHECK without ADD ---------------------------------------------------------------------------
def test_check_without_add_leaves_nothing(bench: Bench) -> None:
    """Before the fix CHECK made the attachment's lock file and left it for good."""
    conf = bench.conf(bench.gated(delWithoutState="succeed"))
    run = bench.run("CHECK", conf, "never-added")
    no_traceback(run)
    assert attachment_files(bench.entries(), "never-added") == []
    assert bench.run("ADD", conf, "c1").rc == 0
    assert bench.run("CHECK", conf, "c1").rc == 0
    assert attachment_files(bench.entries(), "c1") == ["c1:eth0.json", "c1:eth0.lock"]


# -- the delegate's process ----------------------------------------------------------------------
def _syscall(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/syscall").read_text().split(" ", 1)[0]
    except OSError:
        return ""


CLOCK_NANOSLEEP = {"x86_64": "230", "aarch64": "115"}


def test_etxtbsy_is_retried(bench: Bench) -> None:
    """The delegate's file is open for writing (a `cp` over it in progress): exec fails with
    ETXTBSY. Before the fix that was code 100 at once; now the guard retries a second later, as
    libcni does. The writer lets go once the guard is seen sleeping between attempts."""
    import platform

    conf = bench.conf()
    writer = os.open(bench.bin_dir / "gated", os.O_WRONLY)
    try:
        guard = bench.start("ADD", conf)
        sleeping = CLOCK_NANOSLEEP[platform.machine()]
        wait_for(lambda: _syscall(guard.pid) == sleeping or is_dead(guard.pid),
                 "the guard to wait for a retry (or to give up)", 30)
    finally:
        os.close(writer)
    run = guard.finish()
    assert run.rc == 0, run.describe()
    assert [r["command"] for r in bench.records()] == ["ADD"]
    assert bench.run("DEL", conf).rc == 0


def _processes_of(cid: str) -> list[int]:
    """Live processes whose environment names this container ID."""
    wanted = f"CNI_CONTAINERID={cid}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in env and not is_dead(int(name)):
            found.append(int(name))
    return found


# (system call, its x86_64 number, the errno it is answered with, the CNI code expected)
DENIED = {
    "pidfd_open": (434, 24, TRY_AGAIN),  # EMFILE: out of descriptors
    "guardian-fork": (56, 11, IO_FAILURE),  # clone (fork) EAGAIN; posix_spawn uses clone3
}


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="system call numbers of x86_64")
@pytest.mark.parametrize("call", list(DENIED))
def test_failed_process_call_leaves_no_delegate_running(bench: Bench, call: str) -> None:
    """pidfd_open (after the delegate started) or the guardian's fork made to fail by a seccomp
    filter (tests/reliability/seccomp_deny.py, inherited by the guard: the kernel refuses the call,
    no hook in the product; the fork is told from posix_spawn's clone3 by its system call). The
    delegate waits at its start gate, so it runs until someone kills it. Before the fix the guard
    answered (code 100, or 5) and left it running, unwatched; now it is killed and reaped, and
    the next DEL (without the filter) cleans up."""
    nr, err, code = DENIED[call]
    cid = f"denied-{uuid.uuid4().hex[:8]}"
    conf = bench.conf(bench.gated(gates=["ADD:start"]))
    helper = Path(__file__).with_name("seccomp_deny.py")
    argv = [sys.executable, "-I", str(helper), str(nr), str(err), "--", *bench.argv()]
    env = bench.env("ADD", cid)
    try:
        run = run_argv(argv, env, json.dumps(conf).encode())
        left = _processes_of(cid)
    finally:
        for pid in _processes_of(cid):
            os.kill(pid, signal.SIGKILL)
    assert left == [], "a delegate was left running"
    assert run.rc == 1, run.describe()
    assert run.error()["code"] == code, run.describe()
    no_traceback(run)
    delete = bench.run("DEL", bench.conf(), cid)
    assert (delete.rc, delete.stdout) == (0, b""), delete.describe()
    assert attachment_files(bench.entries(), cid) == []


# -- signals and a closed stdout -----------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", ["ADD", "DEL"])
def test_signal_mid_operation_no_traceback_and_next_del_recovers(bench: Bench, command: str,
                                                                 sig: int) -> None:
    """The guard is signalled while its delegate is held at a gate. Before the fix SIGINT
    unwound as KeyboardInterrupt to a traceback on stderr; now it ends the guard as SIGTERM does.
    Either way the delegate dies with the guard and the next DEL succeeds and cleans up."""
    gates = Gates(bench.gate_dir)
    if command == "DEL":
        assert bench.run("ADD", bench.conf()).rc == 0
    held = bench.conf(bench.gated(gates=[f"{command}:done"]))
    guard = bench.start(command, held)
    delegate = gates.wait("c1", command, "done")
    os.kill(guard.pid, sig)
    run = guard.finish()
    assert run.rc == -sig, run.describe()
    no_traceback(run)
    wait_dead(delegate, 10)
    again = bench.run("DEL", bench.conf())
    assert (again.rc, again.stdout) == (0, b""), again.describe()
    assert attachment_files(bench.entries(), "c1") == []
    assert not bench.fake_holds()


def _run_with_closed_stdout(bench: Bench, command: str, conf: dict[str, Any]) -> Run:
    """The runtime has gone: the read end of the guard's stdout pipe is closed before it answers."""
    out_r, out_w = os.pipe()
    os.close(out_r)
    try:
        proc = subprocess.run(bench.argv(), env=bench.env(command), input=json.dumps(conf).encode(),
                              stdout=out_w, stderr=subprocess.PIPE, timeout=60, check=False)
    finally:
        os.close(out_w)
    return Run(proc.returncode, b"", proc.stderr, 0, 0.0)


@pytest.mark.parametrize("command", ["ADD", "DEL"])
def test_closed_stdout_no_traceback_and_next_del_recovers(bench: Bench, command: str) -> None:
    """ADD answers a result, a failing strict DEL an error: both into a broken pipe. Before the
    fix: a BrokenPipeError traceback on stderr. Now one line on stderr, exit 1, and the next DEL
    (which the runtime will send) succeeds and cleans up."""
    conf = bench.conf()
    if command == "DEL":
        assert bench.run("ADD", conf).rc == 0
        bench.fake_state.joinpath("c1:eth0").unlink()  # the delegate will fail this DEL
    run = _run_with_closed_stdout(bench, command, conf)
    assert run.rc == 1, run.describe()
    no_traceback(run)
    assert b"cannot write the answer" in run.stderr, run.describe()
    if command == "DEL":
        bench.fake_state.joinpath("c1:eth0").write_text("{}")
    again = bench.run("DEL", conf)
    assert (again.rc, again.stdout) == (0, b""), again.describe()
    assert attachment_files(bench.entries(), "c1") == []


# -- temp names, the GC log line, the delegate's environment -------------------------------------
def test_stale_temp_file_of_the_same_pid_is_not_in_the_way(bench: Bench) -> None:
    """The guard runs as PID 1 of a new PID namespace (unshare), so the PID a crashed run had
    is known: `.c1:eth0.json.1.tmp` is the temp name every marker write of PID 1 used before
    the fix (O_EXCL then failed: code 5). Now temp names carry a random part as well; the stale
    one is removed by the DEL."""
    bench.net_dir().mkdir(mode=0o700, parents=True)
    os.chmod(bench.state_dir / "networks", 0o700)
    stale = bench.net_dir() / ".c1:eth0.json.1.tmp"
    stale.write_bytes(b'{"state": "attemp')
    stale.chmod(0o600)
    bench.prefix = ["unshare", "--pid", "--fork", "--kill-child"]
    add = bench.run("ADD", bench.conf())
    assert add.rc == 0, add.describe()
    delete = bench.run("DEL", bench.conf())
    assert (delete.rc, delete.stdout) == (0, b""), delete.describe()
    assert attachment_files(bench.entries(), "c1") == []


def test_gc_log_line_keeps_its_pruned_count(bench: Bench) -> None:
    conf = bench.conf(version="1.1.0")
    assert bench.run("ADD", conf, "c1").rc == 0
    assert bench.run("ADD", conf, "c2").rc == 0
    gc = dict(conf, **{"cni.dev/valid-attachments": [{"containerID": "c2", "ifname": "eth0"}]})
    run = bench.run("GC", gc)
    assert run.rc == 0, run.describe()
    line = [line for line in bench.log_lines() if line["command"] == "GC"][-1]
    assert line["pruned"] == ["c1:eth0"], line


ENV_DUMPER = """#!/bin/sh
# FAKE DELEGATE, for this test only: writes the environment it was given, answers an empty
# result. No installable plugin shows its own environment.
cat >/dev/null
env > "$DUMP_TO"
printf '{"cniVersion":"1.0.0","interfaces":[],"ips":[]}'
"""


@pytest.mark.skipif(under_test() == "package", reason="PyInstaller's bootloader: frozen only")
@pytest.mark.parametrize("given", [{"LD_LIBRARY_PATH_ORIG": "/evil"},
                                   {"LD_LIBRARY_PATH": "/a"},
                                   {}], ids=["orig-only", "path-only", "neither"])
def test_delegate_gets_the_runtimes_library_path_unchanged(bench: Bench,
                                                           given: dict[str, str]) -> None:
    """Before the fix an LD_LIBRARY_PATH_ORIG of the runtime's (without LD_LIBRARY_PATH) became
    a live LD_LIBRARY_PATH for the delegate. Now the delegate sees what the runtime gave."""
    dumper = bench.bin_dir / "env-dumper"
    dumper.write_text(ENV_DUMPER)
    dumper.chmod(0o755)
    dump = bench.root / "delegate.env"
    env = bench.env("ADD") | given | {"DUMP_TO": str(dump)}
    run = run_argv(bench.argv(), env, json.dumps(bench.conf({"type": "env-dumper"})).encode())
    assert run.rc == 0, run.describe()
    seen = dict(line.split("=", 1) for line in dump.read_text().splitlines() if "=" in line)
    library = {k: v for k, v in seen.items() if k.startswith("LD_LIBRARY_PATH")}
    assert library == given


# -- dirs a NAD names under the built-in places ---------------------------------------------------
def _isolated() -> None:
    from tests.support import hostdefaults

    if not hostdefaults.isolate().startswith("private mount namespace"):
        pytest.skip("needs the session's tmpfs over /var/lib/cni and /var/log")


NAMED_DIRS = {
    # A dir whose mere existence changes another program (/run/nologin: pam_nologin; stand-in
    # under the session's tmpfs: /run itself is the host's).
    "state-leaf": ("stateDir", "/var/lib/cni/nologin", "/var/lib/cni/nologin"),
    "state-intermediate": ("stateDir", "/var/lib/cni/made/by/nad", "/var/lib/cni/made"),
    # /var/log/journal: journald switches to persistent storage when it appears.
    "log-dir-leaf": ("logFile", "/var/log/journal/x.log", "/var/log/journal"),
    "log-intermediate": ("logFile", "/var/log/a/b/x.log", "/var/log/a"),
}


@pytest.mark.parametrize(("key", "value", "made"),
                         [pytest.param(*v, id=k) for k, v in NAMED_DIRS.items()])
def test_a_nad_path_under_the_built_in_places_creates_no_dir(bench: Bench, key: str, value: str,
                                                              made: str) -> None:
    """On 58a9769 an ADD with `stateDir` /run/nologin created it (every non-root login refused
    then), a DEL with `logFile` under /var/log/journal/ created that dir (journald persistent),
    and any missing intermediate dir was made. Now the guard creates only its own default dirs
    and a leaf in a place the admin named: ADD fails with code 7 before anything is made, DEL
    succeeds and logs to the default log."""
    _isolated()
    conf = bench.conf(**{key: value})
    add = bench.run("ADD", conf)
    no_traceback(add)
    assert add.rc == 1, add.describe()
    assert add.error()["code"] == INVALID_CONFIG, add.describe()
    assert "does not exist" in add.error()["msg"], add.describe()
    assert bench.records() == []
    delete = bench.run("DEL", conf)
    no_traceback(delete)
    assert (delete.rc, delete.stdout) == (0, b""), delete.describe()
    assert not os.path.exists(made), f"the guard created {made}"


def test_the_default_dirs_are_still_made_on_a_fresh_node(bench: Bench) -> None:
    """/var/lib/cni and /var/log exist; the guard's own /var/lib/cni/delguard and
    /var/log/cni-delguard are made when missing (here in the session's tmpfs)."""
    _isolated()
    for own in ("/var/lib/cni/delguard", "/var/log/cni-delguard"):
        shutil.rmtree(own, ignore_errors=True)
    conf = {k: v for k, v in bench.conf().items() if k not in ("stateDir", "logFile")}
    try:
        add = bench.run("ADD", conf)
        assert add.rc == 0, add.describe()
        assert stat.S_IMODE(os.stat("/var/lib/cni/delguard").st_mode) == 0o700
        assert stat.S_IMODE(os.stat("/var/log/cni-delguard").st_mode) == 0o750
        assert bench.run("DEL", conf).rc == 0
    finally:
        for own in ("/var/lib/cni/delguard", "/var/log/cni-delguard"):
            shutil.rmtree(own, ignore_errors=True)
