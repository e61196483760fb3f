"""Running the delegate plugin: find it in CNI_PATH, exec it (never through a shell), bound it.

Like libcni's invoke package: the parent's environment is kept and only CNI_COMMAND is set; stdin
is the delegate's config; stderr passes straight through to the runtime; stdout is captured (at
most MAX_OUTPUT bytes). Each call has a timeout; when it expires the delegate's whole process group
is killed; if the guard itself is killed, so is the delegate with everything it started (run()).
The process mechanics are in spawn.py.
"""

from __future__ import annotations

import os
import time

from cni_delguard.cni import errors, jsonlite
from cni_delguard.invoke import spawn

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

MAX_OUTPUT = 4 * 1024 * 1024


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


def run(
    path: str,
    command: str,
    stdin: bytes,
    environ: Mapping[str, str],
    timeout: float,
    on_spawn: Callable[[int], None] | None = None,
) -> Outcome:
    """Exec the delegate with CNI_COMMAND=command; wait at most `timeout` seconds. `on_spawn`
    gets the delegate's PID (also its session and process group ID) before any I/O.

    While the delegate runs, a guardian (spawn.guardian) waits for this process to die and then
    kills the delegate's whole process group: the delegate and what it started (multus runs its
    delegates as children), which would otherwise finish an abandoned ADD or hold the runtime's
    stderr pipe so that the runtime waits on it."""
    start = time.monotonic()
    env = dict(environ)
    env["CNI_COMMAND"] = command
    try:
        child = spawn.start(path, env)
    except spawn.NotWatchedError as exc:
        raise errors.CniError(
            errors.TRY_AGAIN_LATER, f"cannot watch delegate {path}; it was killed", str(exc)
        ) from None
    except OSError as exc:
        raise errors.CniError(
            errors.DELEGATE_NOT_FOUND, f"cannot execute delegate {path}", str(exc)
        ) from None
    try:
        watcher = spawn.guardian(child.pid)
    except BaseException:
        spawn.abandon(child)
        raise
    try:
        out, timed_out = _talk(child, stdin, start + timeout, on_spawn)
        if timed_out:
            spawn.kill(child.pid)
        status = spawn.wait(child)
    finally:
        spawn.dismiss(watcher)
    return Outcome(status, out, timed_out, (time.monotonic() - start) * 1000.0)


def _talk(
    child: spawn.Child, stdin: bytes, deadline: float, on_spawn: Callable[[int], None] | None
) -> tuple[bytes, bool]:
    if on_spawn is not None:
        try:
            on_spawn(child.pid)
        except BaseException:
            spawn.abandon(child)
            raise
    try:
        return spawn.communicate(child, stdin, deadline, MAX_OUTPUT)
    except BaseException as exc:
        spawn.kill(child.pid)
        spawn.wait(child)
        if isinstance(exc, spawn.OutputTooLarge):
            raise errors.CniError(
                errors.DELEGATE_BAD_OUTPUT, f"delegate printed more than {MAX_OUTPUT} bytes; killed"
            ) from None
        raise


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
