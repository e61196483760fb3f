"""Run a program of the node: the one way, as the node would run it, or not at all.

`program(root, path, args, env, timeout, limit)`:

- **Never through a process.** A root reached through /proc/PID/root (`NodeRoot.process`) runs
  nothing: a process's executable is whatever that process's owner put in its own mount
  namespace (a pod, a local user's binary named `containerd`), and running it as root is running
  their code. Refused before anything is opened.
- **Chrooted into the node's root.** The child enters the root (chroot, then chdir /) between
  fork and exec, so the program meets the node's loader, C library, /etc/ld.so.preload and `#!`
  interpreter, never those of the image this process runs from. "Chrooted into /" is the plain
  exec: when the root is this process's own `/` the host is the node, and the program is the
  node's own, run as its runtime runs it.
- **Only a program only root could have put there.** The path is resolved as the node resolves
  it (`NodeRoot.resolve`), then every directory from the root down and the file itself must be
  owned by root (or this process's user) and not writable by group or others (a sticky
  directory such as /tmp may be, above the file), and the file executable. That rule, not the
  chroot, is what keeps a file another user could write from running as root, at `/` as under
  any root.
- **Bounded.** No shell; stdin empty; the environment `env` alone; stdout and stderr read while
  it runs, at most `limit` bytes of each kept (the rest read and dropped, so the program never
  blocks on a full pipe and this process never holds more than `limit`); killed after
  `timeout` seconds.

A child that cannot enter the root never execs: the failure comes back through subprocess's own
error pipe (a preexec failure), so the program's exit status is always the program's (exit 125,
chroot(1)'s "cannot enter", is never overloaded here). NotRunError says, in one line, why a
program did not run or did not finish.
"""

from __future__ import annotations

import errno
import os
import selectors
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from cni_delguard.host.root import NodeRoot, OutsideRootError, absolute

DEFAULT_LIMIT = 64 * 1024  # a version or a CNI VERSION answer is a few hundred bytes
_READ = 65536


class NotRunError(Exception):
    """The program did not run (refused, cannot be executed, root not entered) or did not
    finish (TimedOutError); the message is one line saying why."""


class TimedOutError(NotRunError):
    """The program ran past its timeout and was killed."""


@dataclass(frozen=True)
class Ran:
    """What a program left: its exit status and at most `limit` bytes of each stream."""

    path: str  # as the node names it (links followed)
    returncode: int
    stdout: bytes
    stderr: bytes
    cut: bool = False  # some output was dropped past the limit


def program(
    root: NodeRoot,
    path: str,
    args: list[str],
    env: dict[str, str],
    timeout: float,
    limit: int = DEFAULT_LIMIT,
) -> Ran:
    """Run the node's program `path` (as the node names it) with `args`, as module doc says."""
    if root.through_process:
        raise NotRunError(f"{path}: found through a process's root ({root.entry}); a program "
                          "found through a process is never run")
    try:
        on_node = root.resolve(path)
    except OutsideRootError as exc:
        raise NotRunError(str(exc)) from None
    why = _unsafe(root, on_node)
    if why:
        raise NotRunError(f"{on_node}: not run: {why}")
    enter = None if root.is_host else _entering(root.path)
    try:
        child = subprocess.Popen(  # no shell; the path is checked above
            # argv[0] as the node names the program (a multi-call binary, busybox or k3s's,
            # chooses by it), the file exec'd the one checked, its links already followed.
            [absolute(path), *args],
            executable=on_node,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=enter,  # noqa: PLW1509 - only chroot and chdir, no lock taken
            start_new_session=True,
        )
    except subprocess.SubprocessError:  # the preexec failed: the root was not entered
        raise NotRunError(f"cannot chroot into {root.path} (to run {on_node} as the node "
                          "would: needs root, or CAP_SYS_CHROOT)") from None
    except OSError as exc:
        raise NotRunError(f"{on_node} cannot be executed{_as_node(root)}: "
                          f"{exec_failure(root, on_node, exc)}") from None
    return _collect(child, on_node, timeout, limit)


def _as_node(root: NodeRoot) -> str:
    return "" if root.is_host else f" with {root.path} as /"


def _entering(where: str) -> Callable[[], None]:
    def enter() -> None:
        # Between fork and exec in a process that may have threads (the watcher's metrics): only
        # system calls, no lock a thread of the parent could have held at the fork.
        os.chroot(where)
        os.chdir("/")

    return enter


def _collect(child: subprocess.Popen[bytes], on_node: str, timeout: float, limit: int) -> Ran:
    """Read both streams as they come, keeping `limit` bytes of each, until both end; kill the
    child's session at the deadline."""
    kept = {"stdout": bytearray(), "stderr": bytearray()}
    cut = False
    deadline = time.monotonic() + timeout
    out, err = child.stdout, child.stderr
    if out is None or err is None:  # both are pipes: Popen was given PIPE for each
        raise NotRunError(f"{on_node}: no pipe to read")
    with selectors.DefaultSelector() as sel:
        sel.register(out, selectors.EVENT_READ, "stdout")
        sel.register(err, selectors.EVENT_READ, "stderr")
        try:
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    _kill(child)
                    raise TimedOutError(f"{on_node} did not finish within {timeout:g} s")
                for key, _ in sel.select(left):
                    chunk = os.read(key.fd, _READ)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        continue
                    room = limit - len(kept[key.data])
                    kept[key.data] += chunk[: max(room, 0)]
                    cut = cut or len(chunk) > room
            code = child.wait(max(deadline - time.monotonic(), 0.001))
        except subprocess.TimeoutExpired:
            _kill(child)
            raise TimedOutError(f"{on_node} did not finish within {timeout:g} s") from None
        finally:
            out.close()
            err.close()
    return Ran(on_node, code, bytes(kept["stdout"]), bytes(kept["stderr"]), cut)


def _kill(child: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(child.pid, 9)
    except OSError:
        child.kill()
    child.wait()


def _unsafe(root: NodeRoot, on_node: str) -> str:
    """Why the program at `on_node` (links followed) is not one only root could have put there,
    or ''."""
    head, name = os.path.split(absolute(on_node))
    try:
        fd = root.open_dir("/")
        try:
            for part in [p for p in head.split("/") if p]:
                problem = _writable_by_others(os.fstat(fd), "/", last=False)
                if problem:
                    return problem
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                                | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = child
            problem = _writable_by_others(os.fstat(fd), head, last=False)
            if problem:
                return problem
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        finally:
            os.close(fd)
    except OSError as exc:
        return exc.strerror or str(exc)
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if not st.st_mode & 0o111:
        return "not executable"
    return _writable_by_others(st, on_node, last=True)


def _writable_by_others(st: os.stat_result, where: str, *, last: bool) -> str:
    if st.st_uid not in (0, os.geteuid()):
        return f"{where} is owned by uid {st.st_uid}"
    if st.st_mode & 0o022 and (last or not st.st_mode & stat.S_ISVTX):
        return f"{where} is writable by group or others (mode {st.st_mode & 0o7777:o})"
    return ""


def exec_failure(root: NodeRoot, on_node: str, exc: OSError) -> str:
    """Why exec failed, in the node's terms: ENOENT for a file that is there means its loader or
    its `#!` interpreter is not (on the node, that is: it may well be here)."""
    if exc.errno == errno.ENOENT and root.lexists(on_node):
        head = root.head(on_node, 256)
        if head.startswith(b"#!"):
            interpreter = head[2:].split(b"\n", 1)[0].strip().decode("utf-8", "replace")
            return f"its interpreter `#!{interpreter}` is missing there"
        return "its program loader (ELF interpreter) or a file it needs is missing there"
    if exc.errno == errno.ENOEXEC:
        return "exec format error (a binary of another arch?)"
    return exc.strerror or str(exc)


def one_line(data: bytes, limit: int = 300) -> str:
    """The first non-empty line of what a program printed, printable and bounded."""
    for line in data[: limit * 4].decode("utf-8", "replace").splitlines():
        if line.strip():
            text = "".join(c if c.isprintable() else "?" for c in line.strip())
            return text[:limit]
    return ""
