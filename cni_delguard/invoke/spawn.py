"""Process mechanics for the delegate: fork/exec without a shell, a poll loop woken by the
delegate's exit, and the guardian that takes the delegate's process group down with a killed guard.

Written on os.posix_spawn/os.fork/os.pidfd_open rather than subprocess: subprocess (with
signal's enum layer, threading, selectors and locale) costs ~7 ms of start-up per exec.
`_signal` is the C module behind `signal`, without the enum wrapper. The guardian learns of the
guard's death from a pipe's EOF rather than PR_SET_PDEATHSIG, which would need ctypes (~3 ms).

The delegate's exit wakes the loop through its pidfd (Linux 5.3). Where pidfd_open does not exist
(ENOSYS: Ubuntu 18.04's 4.15, Debian 10's 4.19, RHEL 8's 4.18 unless backported) or a seccomp
filter refuses it (EPERM), it is the classic SIGCHLD self-pipe instead: the C-level handler writes
to a pipe (set_wakeup_fd), and waitid(WNOWAIT) tells whether it was this child that exited,
without reaping it. Everything else is the same on both.

Two things a hostile host hands the guard, handled here as well as in the frozen bundle's
launcher (packaging/launcher/launcher.c), which covers everything before Python runs:
- SIGCHLD ignored or blocked, inherited across exec from whoever started the guard. Ignored, the
  kernel reaps the delegate by itself and every wait fails with ECHILD ("No child processes");
  blocked, the SIGCHLD pipe never wakes and a delegate that succeeded looks timed out. So it is
  put back to the default and unblocked before each start (two system calls).
- clone3 refused with EPERM by an old runtime's seccomp profile (one written before clone3
  existed, answering every unknown call with EPERM rather than ENOSYS). glibc's posix_spawn
  starts its child with clone3 and falls back to clone on ENOSYS only; on EPERM it fails. The
  start is then tried once more with fork (clone) and exec, which costs a few ms more and only
  there.
"""

from __future__ import annotations

import errno
import os
import select
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as sig
    from collections.abc import Mapping
else:
    try:
        import _signal as sig
    except ImportError:  # pragma: no cover - CPython always has it
        import signal as sig

_MAX_FD = 1 << 16
# ETXTBSY: the delegate's file is open for writing (being replaced, e.g. by a `cp` over it).
# libcni retries the exec 5 times, a second apart (pkg/invoke/raw_exec.go); so do we.
EXEC_RETRIES = 5
EXEC_RETRY_WAIT = 1.0


class OutputTooLarge(Exception):  # noqa: N818 - a condition, reported by the caller
    pass


# pidfd_open's errors that mean "not on this kernel, or not allowed here": watch with SIGCHLD.
_NO_PIDFD = frozenset({errno.ENOSYS, errno.EPERM})


class Child:
    """A started delegate: its PID (also its session and group ID), pipes, and the descriptor
    that becomes readable when it exits: its pidfd, or the read end of the SIGCHLD pipe
    (`wakeup` is then that pipe's write end)."""

    __slots__ = ("exit_fd", "pid", "stdin", "stdout", "wakeup")

    def __init__(self, pid: int, stdin: int, stdout: int, exit_fd: int, wakeup: int | None) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.exit_fd = exit_fd
        self.wakeup = wakeup

    def exited(self) -> bool:
        """Called when exit_fd is readable: has the delegate exited (not reaped yet)?"""
        if self.wakeup is None:
            return True  # a pidfd is readable only once its process has exited
        try:
            while os.read(self.exit_fd, 256):
                pass
        except BlockingIOError:
            pass
        return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def unwatch(self) -> None:
        _unwatch(self.exit_fd, self.wakeup)


def start(path: str, env: Mapping[str, str]) -> Child:
    """Start `path` in a new session (its own process group, killable as a whole) with
    stdin/stdout on pipes and stderr inherited. posix_spawn (vfork underneath) runs no Python in
    the child and copies no page tables; an exec failure comes back as OSError, ETXTBSY after
    EXEC_RETRIES retries."""
    for retry in range(EXEC_RETRIES + 1):
        try:
            return _start_once(path, env)
        except OSError as exc:
            if exc.errno != errno.ETXTBSY or retry == EXEC_RETRIES:
                raise
        time.sleep(EXEC_RETRY_WAIT)
    raise AssertionError("unreachable")  # pragma: no cover


class NotWatchedError(OSError):
    """The delegate started but nothing could be had to watch it with (no pidfd, no pipe: EMFILE,
    ENFILE ...): it was killed and reaped, since a delegate the guard cannot watch must not run
    unguarded."""


# Python ignores these two; the delegate must get the default behaviour back.
_RESET_FOR_DELEGATE = (sig.SIGPIPE, sig.SIGXFSZ)


def _start_once(path: str, env: Mapping[str, str]) -> Child:
    default_sigchld()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    try:
        try:
            pid = os.posix_spawn(
                path,
                [path],
                env,
                file_actions=[(os.POSIX_SPAWN_DUP2, in_r, 0), (os.POSIX_SPAWN_DUP2, out_w, 1)],
                setsid=True,
                setsigdef=_RESET_FOR_DELEGATE,
            )
        except PermissionError:
            # clone3 refused (or the exec itself: then fork and exec gets EPERM again).
            pid = _fork_exec(path, env, in_r, out_w)
    except BaseException:
        os.close(in_w)
        os.close(out_r)
        raise
    finally:
        os.close(in_r)
        os.close(out_w)
    try:
        exit_fd, wakeup = _watch(pid)
    except BaseException as exc:
        kill(pid)
        os.waitpid(pid, 0)
        os.close(in_w)
        os.close(out_r)
        if isinstance(exc, OSError):
            raise NotWatchedError(exc.errno, f"cannot watch it: {exc.strerror}") from None
        raise
    return Child(pid, in_w, out_r, exit_fd, wakeup)


def default_sigchld() -> None:
    """SIGCHLD as a fresh process has it: default action, unblocked (see the module's doc)."""
    sig.signal(sig.SIGCHLD, sig.SIG_DFL)
    sig.pthread_sigmask(sig.SIG_UNBLOCK, (sig.SIGCHLD,))


def _fork_exec(path: str, env: Mapping[str, str], stdin: int, stdout: int) -> int:
    """posix_spawn's work with fork (clone, not clone3) and exec: a new session, stdin and
    stdout on the pipes, SIGPIPE and SIGXFSZ back to default. An exec failure comes back as
    OSError through a close-on-exec pipe, as posix_spawn reports it. The guard has no other
    thread, so the child may run Python until the exec."""
    err_r, err_w = os.pipe()
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child, which execs or exits
            try:
                os.setsid()
                os.dup2(stdin, 0)
                os.dup2(stdout, 1)
                for signum in _RESET_FOR_DELEGATE:
                    sig.signal(signum, sig.SIG_DFL)
                os.execve(path, [path], env)  # noqa: S606 - the delegate, never a shell
            except OSError as exc:
                os.write(err_w, (exc.errno or 0).to_bytes(4, "little"))
            finally:
                os._exit(127)
        os.close(err_w)
        err_w = -1
        failed = os.read(err_r, 4)
    finally:
        if err_w >= 0:
            os.close(err_w)
        os.close(err_r)
    if failed:
        os.waitpid(pid, 0)
        code = int.from_bytes(failed, "little")
        raise OSError(code, os.strerror(code), path)
    return pid


def _watch(pid: int) -> tuple[int, int | None]:
    """A descriptor that becomes readable when `pid` exits, and the SIGCHLD pipe's write end
    (None with a pidfd)."""
    try:
        return os.pidfd_open(pid), None
    except OSError as exc:
        if exc.errno not in _NO_PIDFD:
            raise
    r, w = os.pipe()
    try:
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        sig.signal(sig.SIGCHLD, _on_sigchld)  # the C handler behind it writes to the pipe
        sig.set_wakeup_fd(w, warn_on_full_buffer=False)
    except BaseException:
        _unwatch(r, w)
        raise
    os.write(w, b"\0")  # look once: the delegate may have exited before the handler was set
    return r, w


def _unwatch(exit_fd: int, wakeup: int | None) -> None:
    os.close(exit_fd)
    if wakeup is not None:
        sig.set_wakeup_fd(-1)
        sig.signal(sig.SIGCHLD, sig.SIG_DFL)
        os.close(wakeup)


def _on_sigchld(signum: int, frame: object) -> None:
    """Nothing to do in Python: the wakeup byte in the pipe is what the poll loop waits for."""


def guardian(group: int) -> tuple[int, int]:
    """Fork a watcher that SIGKILLs `group` if this process dies first; returns its PID and
    the pipe end this process keeps open. When this process dies, however it dies, the kernel
    closes that end and the watcher reads EOF. The watcher holds no other descriptor of ours
    (so it never delays an EOF the runtime waits for) and lives in its own session (so a kill
    of our process group leaves it standing)."""
    alive_r, alive_w = os.pipe()
    try:
        pid = os.fork()
    except BaseException:
        os.close(alive_r)
        os.close(alive_w)
        raise
    if pid:
        os.close(alive_r)
        return pid, alive_w
    try:  # pragma: no cover - runs in the watcher
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, alive_r)
        os.closerange(alive_r + 1, _MAX_FD)
        while os.read(alive_r, 1):
            pass
        os.killpg(group, sig.SIGKILL)
    finally:
        os._exit(0)


def dismiss(watcher: tuple[int, int]) -> None:
    """Stop the watcher (the delegate is done) before letting go of our end of its pipe."""
    pid, alive_w = watcher
    kill(pid, group=False)
    os.waitpid(pid, 0)
    os.close(alive_w)


def abandon(child: Child) -> None:
    """Kill and reap a child whose pipes communicate() has not taken over (and closed) yet."""
    kill(child.pid)
    os.close(child.stdin)
    os.close(child.stdout)
    wait(child)


def kill(pid: int, group: bool = True) -> None:
    try:
        if group:
            os.killpg(pid, sig.SIGKILL)
        else:
            os.kill(pid, sig.SIGKILL)
    except ProcessLookupError:
        pass


def communicate(child: Child, data: bytes, deadline: float, limit: int) -> tuple[bytes, bool]:
    """Feed `data`, collect stdout until the child exits (then drain what it left in the pipe:
    a grandchild may hold the pipe open) or until `deadline` (then timed_out is True). Raises
    OutputTooLarge past `limit` bytes. Closes both pipes."""
    io = _Pipes(child, data, limit)
    try:
        while not io.exited:
            left = deadline - time.monotonic()
            if left <= 0:
                return io.output(), True
            for fd, _ in io.poller.poll(left * 1000.0):
                io.ready(fd)
        io.drain()
        return io.output(), False
    finally:
        io.close()


class _Pipes:
    """The poll loop's state: what is still to write, what was read, which fds are open."""

    def __init__(self, child: Child, data: bytes, limit: int) -> None:
        self.child = child
        self.pending = memoryview(data)
        self.chunks: list[bytes] = []
        self.size = 0
        self.limit = limit
        self.exited = False
        self.open = {child.stdin, child.stdout}
        self.poller = select.poll()
        self.poller.register(child.exit_fd, select.POLLIN)
        os.set_blocking(child.stdout, False)
        self.poller.register(child.stdout, select.POLLIN)
        os.set_blocking(child.stdin, False)
        if self.pending:
            self.poller.register(child.stdin, select.POLLOUT)
        else:
            self._close(child.stdin)

    def ready(self, fd: int) -> None:
        if fd == self.child.exit_fd:
            self.exited = self.child.exited()
        elif fd == self.child.stdin and fd in self.open:
            try:
                self.pending = self.pending[os.write(fd, self.pending[:65536]) :]
            except BrokenPipeError:
                self.pending = memoryview(b"")
            if not self.pending:
                self._close(fd)
        elif fd == self.child.stdout and fd in self.open:
            self.drain()

    def drain(self) -> None:
        """Read what is available now; close stdout at EOF."""
        fd = self.child.stdout
        while fd in self.open:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                self._close(fd)
                return
            self.size += len(chunk)
            if self.size > self.limit:
                raise OutputTooLarge
            self.chunks.append(chunk)

    def output(self) -> bytes:
        return b"".join(self.chunks)

    def _close(self, fd: int) -> None:
        try:
            self.poller.unregister(fd)
        except KeyError:
            pass
        self.open.discard(fd)
        os.close(fd)

    def close(self) -> None:
        for fd in list(self.open):
            self._close(fd)


def wait(child: Child) -> int:
    """The exit status, as subprocess reports it (negative: killed by that signal)."""
    try:
        _, status = os.waitpid(child.pid, 0)
    finally:
        child.unwatch()
    return os.waitstatus_to_exitcode(status)
