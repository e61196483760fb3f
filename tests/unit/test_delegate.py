"""Finding and running the delegate: CNI_PATH lookup, timeouts, process groups, bounded output."""

from __future__ import annotations

import errno
import json
import os
import sys
import time

import pytest

from cni_delguard.cni import errors
from cni_delguard.invoke import delegate
from tests.support.waiting import wait_for, wait_gone


def _plugin(bin_dir, name, body):
    path = bin_dir / name
    path.write_text(f"#!{sys.executable} -I\nimport os, sys, time, json\n{body}\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "/usr/lib/cni/bridge", "x\0y"])
def test_types_with_path_parts_are_refused(tmp_path, bad):
    with pytest.raises(errors.CniError) as exc:
        delegate.find(bad, str(tmp_path))
    assert exc.value.code == errors.INVALID_CONFIG


def test_find_walks_cni_path_in_order(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    second = _plugin(tmp_path / "b", "p", "")
    (tmp_path / "a" / "p").write_text("not executable")
    assert delegate.find("p", f"{tmp_path}/a::{tmp_path}/b") == str(second)
    with pytest.raises(errors.CniError) as exc:
        delegate.find("missing", str(tmp_path))
    assert exc.value.code == errors.DELEGATE_NOT_FOUND


def test_environment_is_kept_stdin_passed_and_only_the_command_set(tmp_path):
    path = _plugin(
        tmp_path,
        "p",
        "sys.stdout.write(json.dumps({'cmd': os.environ['CNI_COMMAND'], "
        "'keep': os.environ['KEEP'], 'stdin': sys.stdin.read()}))",
    )
    out = delegate.run(str(path), "CHECK", b'{"x": 1}', {"KEEP": "yes", "CNI_COMMAND": "DEL"}, 10)
    assert out.ok
    assert json.loads(out.stdout) == {"cmd": "CHECK", "keep": "yes", "stdin": '{"x": 1}'}


def test_a_large_stdin_does_not_deadlock(tmp_path):
    path = _plugin(
        tmp_path, "p", "data = sys.stdin.buffer.read(); sys.stdout.write(str(len(data)))"
    )
    big = b"x" * (3 * 1024 * 1024)
    out = delegate.run(str(path), "ADD", big, {}, 20)
    assert out.stdout == str(len(big)).encode()


def test_timeout_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    path = _plugin(
        tmp_path,
        "p",
        (
            "import subprocess\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
            "time.sleep(60)"
        ),
    )
    start = time.monotonic()
    out = delegate.run(str(path), "ADD", b"{}", {}, 1.0)
    assert out.timed_out
    assert time.monotonic() - start < 10
    wait_gone([int(pidfile.read_text())], "the delegate's child to exit after the timeout", 5)
    err = delegate.error_from(out, "p", "ADD")
    assert err.code == errors.TRY_AGAIN_LATER


def test_a_delegate_that_closes_stdout_but_lingers_is_timed_out(tmp_path):
    path = _plugin(tmp_path, "p", "os.close(1); time.sleep(60)")
    out = delegate.run(str(path), "DEL", b"{}", {}, 1.0)
    assert out.timed_out


def test_output_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(delegate, "MAX_OUTPUT", 1024)
    path = _plugin(tmp_path, "p", "sys.stdout.write('x' * 100000)")
    with pytest.raises(errors.CniError) as exc:
        delegate.run(str(path), "ADD", b"{}", {}, 10)
    assert exc.value.code == errors.DELEGATE_BAD_OUTPUT


@pytest.mark.parametrize(
    ("stdout", "status", "code", "verbatim"),
    [
        pytest.param(b'{"cniVersion":"1.0.0","code":7,"msg":"m"}', 1, 7, True, id="cni-error"),
        pytest.param(b'{"code": 150, "msg": "plugin-specific"}', 2, 150, True, id="custom-code"),
        pytest.param(b"panic: oops", 2, errors.DELEGATE_BAD_OUTPUT, False, id="garbage"),
        pytest.param(b'{"code": "7"}', 1, errors.DELEGATE_BAD_OUTPUT, False, id="string-code"),
        pytest.param(b'{"code": true}', 1, errors.DELEGATE_BAD_OUTPUT, False, id="bool-code"),
        pytest.param(b"", 1, errors.DELEGATE_BAD_OUTPUT, False, id="silent"),
    ],
)
def test_delegate_errors_pass_through_unchanged_when_well_formed(stdout, status, code, verbatim):
    err = delegate.error_from(delegate.Outcome(status, stdout, False, 1.0), "p", "DEL")
    assert err.code == code
    assert (err.to_json("1.0.0") == stdout) is verbatim


@pytest.mark.parametrize("depth", ["delegate", "grandchild"])
def test_the_delegate_and_its_children_die_with_the_guard(tmp_path, depth):
    """A guard killed by the runtime leaves nothing running: PR_SET_PDEATHSIG takes the
    delegate, the guardian takes the rest of its process group (multus runs its delegates as
    children)."""
    import signal
    import subprocess

    pidfile = tmp_path / "pid"
    body = f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)"
    if depth == "grandchild":
        body = (
            "import subprocess\n"
            f"child = subprocess.Popen([sys.executable, '-c', {body!r}])\n"
            "time.sleep(60)"
        )
    path = _plugin(tmp_path, "p", body)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    guard = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                f"import sys; sys.path.insert(0, {repo!r})\n"
                "from cni_delguard.invoke import delegate\n"
                f"delegate.run({str(path)!r}, 'ADD', b'{{}}', {{}}, 60)"
            ),
        ]
    )
    wait_for(lambda: pidfile.exists() and pidfile.read_text(), f"the {depth}'s pid", 10,
             every=0.02)
    guard.send_signal(signal.SIGKILL)
    guard.wait()
    wait_gone([int(pidfile.read_text())], f"the {depth} to exit after the SIGKILLed guard", 5)


def _live_children() -> list[int]:
    """PIDs whose parent is this process and that are not zombies."""
    out = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                fields = f.read().rsplit(b") ", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z" and int(fields[1]) == os.getpid():
            out.append(int(p))
    return out


def test_the_guardian_is_gone_after_a_normal_call(tmp_path):
    path = _plugin(tmp_path, "p", "sys.stdout.write('{}')")
    before = set(_live_children())  # other tests' fixtures may keep children of their own
    assert delegate.run(str(path), "ADD", b"{}", {}, 10).ok
    assert set(_live_children()) - before == set()


@pytest.fixture
def no_pidfd(monkeypatch):
    """pidfd_open as a kernel before 5.3 answers it (the frozen binary meets the real refusal,
    from a seccomp filter, in tests/reliability/test_kernel_floor.py)."""

    def enosys(pid, flags=0):
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

    monkeypatch.setattr(os, "pidfd_open", enosys)


def test_without_pidfd_the_delegate_is_watched_through_sigchld(tmp_path, no_pidfd):
    """Its exit wakes the loop (no deadline reached), its output and status come back, and the
    SIGCHLD handler and wakeup fd are put back afterwards."""
    import signal

    path = _plugin(tmp_path, "p", "sys.stdout.write(sys.stdin.read().upper()); sys.exit(3)")
    start = time.monotonic()
    out = delegate.run(str(path), "ADD", b"abc", {}, 30)
    assert (out.exit_status, out.stdout, out.timed_out) == (3, b"ABC", False)
    assert time.monotonic() - start < 20
    assert signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL
    assert signal.set_wakeup_fd(-1) == -1


def test_without_pidfd_a_timeout_still_kills_the_group(tmp_path, no_pidfd):
    path = _plugin(tmp_path, "p", "time.sleep(60)")
    out = delegate.run(str(path), "ADD", b"", {}, 1)
    assert out.timed_out
    assert out.exit_status == -9
