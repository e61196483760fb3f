"""Running the delegate plugin: find it in CNI_PATH, exec it (never through a shell), bound it.

Like libcni's invoke package: the parent's environment is kept and only CNI_COMMAND is set; stdin
is the delegate's config; stderr passes straight through to the runtime; stdout is captured (at
most MAX_OUTPUT bytes). Each call has a timeout; when it expires the delegate's whole process group
is killed. The delegate also gets SIGKILL if the guard itself dies (PR_SET_PDEATHSIG), so a guard
killed by a runtime's timeout does not leave its delegate running.
"""

from __future__ import annotations

import os
import select
import signal
import time

from cni_delguard import errors, jsonlite

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

MAX_OUTPUT = 4 * 1024 * 1024
_PR_SET_PDEATHSIG = 1


class Outcome:
    """How one delegate call ended."""

    __slots__ = ("duration_ms", "exit_status", "stdout", "timed_out")

    def __init__(
        self, exit_status: int, stdout: bytes, timed_out: bool, duration_ms: float
    ) -> None:
        self.exit_status = exit_status
        self.stdout = stdout
        self.timed_out = timed_out
        self.duration_ms = duration_ms

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.timed_out


def find(plugin_type: str, cni_path: str) -> str:
    """The delegate's executable in CNI_PATH (code 100 when there is none)."""
    if plugin_type in ("", ".", "..") or "/" in plugin_type or "\0" in plugin_type:
        raise errors.CniError(errors.INVALID_CONFIG, f"invalid delegate type {plugin_type!r}")
    for directory in cni_path.split(os.pathsep):
        if not directory:
            continue
        candidate = os.path.join(directory, plugin_type)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise errors.CniError(
        errors.DELEGATE_NOT_FOUND, f"failed to find plugin {plugin_type!r} in path {cni_path!r}"
    )


_libc_handle: list[Any] = []


def _libc() -> Any:
    """libc through ctypes, loaded once (and before a fork, so the child does not load it)."""
    if not _libc_handle:
        import ctypes

        _libc_handle.append(ctypes.CDLL(None, use_errno=True))
    return _libc_handle[0]


def _prctl_pdeathsig(sig: int) -> None:
    _libc().prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)


def _child_setup() -> None:
    """In the forked child before exec: die with the guard (checked again for the race)."""
    parent = os.getppid()
    _prctl_pdeathsig(signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _guardian(group: int) -> int:
    """Fork a watcher that SIGKILLs the delegate's whole process group if the guard dies first.

    PR_SET_PDEATHSIG reaches the delegate only, not what it started (multus runs its delegates
    as children); a survivor would finish an abandoned ADD, or hold the runtime's stderr pipe
    open so that the runtime waits on it. The watcher holds no descriptor of the guard's (so it
    never delays an EOF), lives in its own session (so a kill of the guard's group leaves it),
    and is dismissed once the delegate has been waited for."""
    _libc()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setsid()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 1 << 16)
        _prctl_pdeathsig(signal.SIGHUP)
        if os.getppid() == parent:
            signal.sigwait({signal.SIGHUP})
        os.killpg(group, signal.SIGKILL)
    finally:
        os._exit(0)


def _dismiss(guardian: int) -> None:
    try:
        os.kill(guardian, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(guardian, 0)


def run(
    path: str,
    command: str,
    stdin: bytes,
    environ: Mapping[str, str],
    timeout: float,
    on_spawn: Callable[[int], None] | None = None,
) -> Outcome:
    """Exec the delegate with CNI_COMMAND=command; wait at most `timeout` seconds. `on_spawn`
    gets the delegate's PID (also its session and process group ID) before any I/O."""
    start = time.monotonic()
    proc = _spawn(path, command, environ)
    guardian = _guardian(proc.pid)
    try:
        if on_spawn is not None:
            try:
                on_spawn(proc.pid)
            except BaseException:
                _kill_group(proc.pid)
                proc.wait()
                raise
        status, out, timed_out = _supervise(proc, stdin, start + timeout)
    finally:
        _dismiss(guardian)
    return Outcome(status, out, timed_out, (time.monotonic() - start) * 1000.0)


def _spawn(path: str, command: str, environ: Mapping[str, str]) -> Any:
    import subprocess

    env = dict(environ)
    env["CNI_COMMAND"] = command
    try:
        return subprocess.Popen(
            [path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            env=env,
            close_fds=True,
            start_new_session=True,
            preexec_fn=_child_setup,  # noqa: PLW1509
        )
    except OSError as exc:
        raise errors.CniError(
            errors.DELEGATE_NOT_FOUND, f"cannot execute delegate {path}", str(exc)
        ) from None


def _supervise(proc: Any, stdin: bytes, deadline: float) -> tuple[int, bytes, bool]:
    """(exit status, stdout, timed out): the whole exchange, bounded by `deadline`."""
    import subprocess

    out, timed_out = _exchange(proc, stdin, deadline)
    status = 0
    if not timed_out:
        try:  # stdout is closed; the delegate may still linger
            status = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    if timed_out:
        _kill_group(proc.pid)
        status = proc.wait()
    return status, out, timed_out


def _exchange(proc: Any, stdin: bytes, deadline: float) -> tuple[bytes, bool]:
    """Feed stdin and collect stdout until EOF, the deadline, or MAX_OUTPUT (then kill)."""
    wfd, rfd = proc.stdin.fileno(), proc.stdout.fileno()
    os.set_blocking(wfd, False)
    pending = memoryview(stdin)
    chunks: list[bytes] = []
    size = 0
    poller = select.poll()
    poller.register(rfd, select.POLLIN)
    poller.register(wfd, select.POLLOUT)
    open_fds = {rfd, wfd}
    if not pending:
        _close_stdin(proc, poller, open_fds)
    while rfd in open_fds:
        left = deadline - time.monotonic()
        if left <= 0:
            _close_all(proc, open_fds)
            return b"".join(chunks), True
        for fd, _ in poller.poll(left * 1000.0):
            if fd == wfd and wfd in open_fds:
                try:
                    pending = pending[os.write(wfd, pending[:65536]) :]
                except BrokenPipeError:
                    pending = memoryview(b"")
                if not pending:
                    _close_stdin(proc, poller, open_fds)
            elif fd == rfd:
                chunk = os.read(rfd, 65536)
                if not chunk:
                    poller.unregister(rfd)
                    open_fds.discard(rfd)
                    continue
                size += len(chunk)
                if size > MAX_OUTPUT:
                    _kill_group(proc.pid)
                    _close_all(proc, open_fds)
                    raise errors.CniError(
                        errors.DELEGATE_BAD_OUTPUT,
                        f"delegate printed more than {MAX_OUTPUT} bytes; killed",
                    )
                chunks.append(chunk)
    _close_all(proc, open_fds)
    return b"".join(chunks), False


def _close_stdin(proc: Any, poller: select.poll, open_fds: set[int]) -> None:
    wfd = proc.stdin.fileno()
    poller.unregister(wfd)
    open_fds.discard(wfd)
    proc.stdin.close()


def _close_all(proc: Any, open_fds: set[int]) -> None:
    for stream in (proc.stdin, proc.stdout):
        if stream is not None and not stream.closed:
            stream.close()
    open_fds.clear()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def error_from(outcome: Outcome, plugin_type: str, command: str) -> errors.CniError:
    """The error a failed delegate call becomes: its own CNI error verbatim when it gave one."""
    if outcome.timed_out:
        return errors.CniError(
            errors.TRY_AGAIN_LATER,
            f"delegate {plugin_type} timed out on {command}; its process group was killed",
        )
    try:
        body = jsonlite.loads(outcome.stdout)
    except ValueError:
        body = None
    if (
        isinstance(body, dict)
        and isinstance(body.get("code"), int)
        and not isinstance(body.get("code"), bool)
    ):
        return errors.DelegateError(
            body["code"], str(body.get("msg", "")), outcome.stdout, outcome.exit_status
        )
    text = outcome.stdout[:512].decode("utf-8", "replace")
    return errors.CniError(
        errors.DELEGATE_BAD_OUTPUT,
        f"delegate {plugin_type} failed on {command} (exit {outcome.exit_status}) "
        "without a CNI error",
        text,
    )
