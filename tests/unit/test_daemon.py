"""tests/support/daemon.py with real processes (small Python scripts): readiness only by what the
daemon says after this start, a daemon that dies while awaited, stop with grace, kill, reap."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.daemon import (
    Answer,
    Daemon,
    DaemonExitedError,
    FileWritten,
    LogLine,
    Record,
    unix_http_status,
)
from tests.support.waiting import WaitTimeoutError, pid_alive, wait_for

# Binds a unix socket, then says "listening" only once the test lets it (a file appears): the
# window in which a check of the socket's existence would call it ready too early.
BINDS_THEN_SAYS = r"""
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen()
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
print("listening on", sys.argv[1], flush=True)
time.sleep(300)
"""
IGNORES_TERM = r"""
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("up", flush=True)
time.sleep(300)
"""
FORKS = r"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
print("child", child.pid, flush=True)
time.sleep(300)
"""


def script(tmp: Path, body: str, *args: str, ready: object = None, name: str = "d") -> Daemon:
    return Daemon(name, [sys.executable, "-I", "-c", body, *args], tmp / f"{name}.log",
                  ready=ready, start_bound=30)  # type: ignore[arg-type]


def test_ready_when_it_says_so_not_when_its_socket_exists(tmp_path: Path) -> None:
    sock, go = tmp_path / "s.sock", tmp_path / "go"
    d = script(tmp_path, BINDS_THEN_SAYS, str(sock), str(go),
               ready=LogLine(tmp_path / "d.log", r"^listening on (\S+)$"))
    try:
        d.start(wait=False)
        wait_for(sock.exists, "the socket", timeout=30)
        with pytest.raises(WaitTimeoutError, match="d to say it is ready"):
            d.wait_ready(timeout=0.3)  # bound, not serving: not ready
        go.touch()
        said = d.wait_ready()
        assert isinstance(said, re.Match) and said.group(1) == str(sock)
    finally:
        d.kill()


def test_a_line_said_before_this_start_does_not_count(tmp_path: Path) -> None:
    (tmp_path / "d.log").write_text("listening on /old\n")
    sock, go = tmp_path / "s.sock", tmp_path / "go"
    d = script(tmp_path, BINDS_THEN_SAYS, str(sock), str(go),
               ready=LogLine(tmp_path / "d.log", r"^listening on"))
    try:
        d.start(wait=False)
        wait_for(sock.exists, "the socket", timeout=30)
        with pytest.raises(WaitTimeoutError):
            d.wait_ready(timeout=0.3)
        go.touch()
        d.wait_ready()
        assert "===== start 1 =====" in d.log_text()
    finally:
        d.kill()


def test_a_daemon_that_exits_before_it_is_ready_fails_the_wait_with_its_log(
        tmp_path: Path) -> None:
    d = script(tmp_path, "import sys; print('bad config: x'); sys.exit(3)",
               ready=LogLine(tmp_path / "d.log", "never"))
    with pytest.raises(DaemonExitedError, match=r"(?s)d exited with 3:.*bad config: x"):
        d.start()


@pytest.mark.parametrize(("lines", "expected"), [
    pytest.param(['{"phase": "listening", "n": 1}\n'], 1, id="one-after-the-mark"),
    pytest.param(['{"phase": "start"}\n', '{"phase": "listening", "n": 2}\n'], 2,
                 id="skips-others"),
    pytest.param(['{"phase": "listening", "n": 3}'], None, id="half-written-line-not-read"),
])
def test_record_counts_only_whole_lines_after_the_mark(tmp_path: Path, lines: list[str],
                                                       expected: int | None) -> None:
    path = tmp_path / "record.jsonl"
    path.write_text(json.dumps({"phase": "listening", "n": 0}) + "\n")
    said = Record(path, lambda e: e["phase"] == "listening")
    said.mark()
    with path.open("a") as f:
        f.writelines(lines)
    found = said.said()
    assert (found or {}).get("n") == expected


@pytest.mark.parametrize("left", [pytest.param(None, id="none-before"),
                                  pytest.param("{}", id="one-left-by-a-killed-daemon")])
def test_a_file_counts_once_written_after_the_mark(tmp_path: Path, left: str | None) -> None:
    """A daemon killed with its node leaves its file (multus's 00-multus.conf); only a rewrite
    after this start counts, even by rename of the same bytes."""
    path = tmp_path / "00-multus.conf"
    if left is not None:
        path.write_text(left)
    said = FileWritten(path)
    said.mark()
    assert not said.said()
    tmp = tmp_path / "new"
    tmp.write_text("{}")
    tmp.rename(path)
    assert said.said()


def test_an_answer_is_asked_each_time(tmp_path: Path) -> None:
    answers = iter([None, None, "v1"])
    d = script(tmp_path, "import time; time.sleep(300)",
               ready=Answer(lambda: next(answers), "its version"))
    try:
        assert d.start() == "v1"
    finally:
        d.kill()


def test_stop_gives_grace_then_kills(tmp_path: Path) -> None:
    d = script(tmp_path, IGNORES_TERM, ready=LogLine(tmp_path / "d.log", "^up$"))
    d.start()
    assert d.stop(grace=0.5) == -9, "SIGTERM ignored: SIGKILL after the grace"
    polite = script(tmp_path, "import time; print('up', flush=True); time.sleep(300)",
                    ready=LogLine(tmp_path / "p.log", "^up$"), name="p")
    polite.start()
    assert polite.stop() == -15


def test_kill_with_children_ends_what_it_runs(tmp_path: Path) -> None:
    d = script(tmp_path, FORKS, ready=LogLine(tmp_path / "d.log", r"^child (\d+)$"))
    said = d.start()
    child = int(said.group(1))  # type: ignore[attr-defined]
    assert pid_alive(child)
    assert d.kill(children=True) == [child]
    assert d.returncode == -9 and not pid_alive(child)


def test_reap_fails_for_a_daemon_that_outlived_its_node(tmp_path: Path) -> None:
    d = script(tmp_path, "import time; time.sleep(300)")
    d.start()
    try:
        with pytest.raises(AssertionError, match="outlived its node"):
            d.reap(timeout=0.2)
    finally:
        d.kill()
    assert d.reap() == -9


def test_it_passes_for_a_popen(tmp_path: Path) -> None:
    """pid, poll and wait as a Popen's: code written for a Popen takes a Daemon."""
    d = script(tmp_path, "print('x')")
    d.start()
    assert d.wait(timeout=30) == 0 and d.poll() == 0 and d.returncode == 0
    assert not d.running()



# Listens at once, answers HTTP only once the test lets it: CRI-O's socket before its services.
LISTENS_THEN_SERVES = r"""
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen()
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
while True:
    c, _ = s.accept()
    try:
        c.recv(1024); c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    except OSError:
        pass  # the client that gave up before it was served
    c.close()
"""


def test_a_unix_socket_that_accepts_is_not_one_that_answers(tmp_path: Path) -> None:
    sock, go = tmp_path / "crio.sock", tmp_path / "go"
    d = script(tmp_path, LISTENS_THEN_SERVES, str(sock), str(go),
               ready=Answer(lambda: unix_http_status(sock, "/info", timeout=0.2) == 200,
                            "200 on /info"))
    try:
        d.start(wait=False)
        wait_for(sock.exists, "the socket", timeout=30)
        assert unix_http_status(sock, "/info", timeout=0.2) is None
        go.touch()
        assert d.wait_ready() is True
    finally:
        d.kill()


def test_adopt_ends_a_process_started_elsewhere(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    d = Daemon.adopt("elsewhere", proc, tmp_path / "x.log")
    assert d.running() and d.pid == proc.pid
    assert d.stop() == -15
