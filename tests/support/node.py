"""A throwaway test node: its own dirs under one /tmp dir, bound over the host's paths inside
namespaces of its own, held by one process (tests/support/holder.py).

Everything the node runs enters its namespaces (`enter`), so what it writes under /run,
/var/lib/cni, ... lands in the node's dirs, never the host's. A suite's node is configuration of
this one (its dirs, its binds, its kernel settings, whether it has a network namespace of its
own) plus what it runs: tests/e2e_cri/node.py adds a runtime, tests/support/nodens.py nothing.

- `power_off()` is a node's power loss: every process of the node SIGKILLed (found by its mount
  namespace and its cgroups), the holder and with it every mount gone, the volatile dirs
  emptied, the cgroups removed; the disk kept. `boot()` makes new namespaces.
- `teardown()` runs every step even when one fails and returns what it could not undo.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Self

from tests.support import holder as holders
from tests.support.netns import unique_name
from tests.support.waiting import all_pids, pid_alive, wait_gone


@dataclass
class Node:
    tmp: Path
    name: str  # also its cgroup parent
    holder: subprocess.Popen[str] | None = None
    holder_starts: int = 0
    notes: list[str] = field(default_factory=list)  # what it had to do differently here
    made_netns: list[str] = field(default_factory=list)

    # A suite's configuration:
    prefix: ClassVar[str] = "dgnode-"  # of its temp dir (short: unix socket paths <= 108 bytes)
    dirs: ClassVar[tuple[str, ...]] = ()  # made under tmp at creation, besides the binds'
    own: ClassVar[tuple[tuple[str, str], ...]] = ()  # (dir under tmp, the path it is inside)
    volatile: ClassVar[tuple[str, ...]] = ()  # dirs under tmp emptied at power_off
    sysctls: ClassVar[dict[str, str]] = {}  # /proc/sys/<key> -> value, files bound over it
    net: ClassVar[bool] = False  # a network namespace of its own (lo up)

    @classmethod
    def make(cls, prefix: str | None = None, **fields: object) -> Self:
        """Its dirs made (the holder not started yet); `prefix` of its temp dir, when not the
        class's."""
        tmp = Path(tempfile.mkdtemp(prefix=prefix or cls.prefix, dir="/tmp"))
        node = cls(tmp=tmp, name=tmp.name.replace("_", "x"), **fields)  # type: ignore[arg-type]
        for sub in (*cls.dirs, *(sub for sub, _ in cls.own)):
            (tmp / sub).mkdir(parents=True, exist_ok=True)
        for i, value in enumerate(cls.sysctls.values()):
            (tmp / "sysctl").mkdir(exist_ok=True)
            (tmp / "sysctl" / str(i)).write_text(value + "\n", encoding="ascii")
        return node

    # --- paths --------------------------------------------------------------------------------

    def binds(self) -> list[tuple[Path, str]]:
        """What is bound where inside: the node's own dirs, then its kernel settings."""
        pairs = [(self.tmp / sub, inside) for sub, inside in self.own]
        pairs += [(self.tmp / "sysctl" / str(i), f"/proc/sys/{key}")
                  for i, key in enumerate(self.sysctls)]
        return pairs

    def path(self, inside: str) -> Path:
        """Where a path of the node's (/run/..., /var/lib/cni/...) is on the machine."""
        for src, dst in self.binds():
            if inside == dst or inside.startswith(dst + "/"):
                return Path(str(src) + inside[len(dst):])
        raise KeyError(f"{inside} is not one of the node's own dirs")

    @property
    def cgroup_parent(self) -> str:
        return f"/{self.name}"

    # --- its namespaces -----------------------------------------------------------------------

    def start_holder(self) -> None:
        """New namespaces, the binds in them (the mount points the host lacks in overlays under
        <tmp>/overlays/<n>, a fresh dir each boot)."""
        self.holder_starts += 1
        self.holder = holders.start(self.binds(), net=self.net,
                                    overlays=self.tmp / "overlays" / str(self.holder_starts))

    @property
    def enter_all(self) -> tuple[str, ...]:
        """The argv prefix that runs a command in every namespace of the node (its mounts, and
        its network with `net`; nsenter execs it in place: the pid is the command's); valid
        until power_off."""
        assert self.holder is not None
        return holders.enter(self.holder, net=self.net)

    @property
    def enter(self) -> tuple[str, ...]:
        """The argv prefix that runs a command inside the node: enter_all, unless a suite
        narrows it."""
        return self.enter_all

    def mount_ns(self) -> str:
        assert self.holder is not None
        return holders.mount_ns(self.holder)

    def run_inside(self, argv: list[str], timeout: float = 60,
                   env: dict[str, str] | None = None, stdin: str | None = None,
                   ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.enter, *argv], capture_output=True, text=True, env=env,
                              input=stdin, timeout=timeout, check=False)

    def add_netns(self, prefix: str = "dgnd") -> str:
        """A new network namespace inside the node, lo up; returns its path there."""
        name = unique_name(prefix)
        for argv in (["ip", "netns", "add", name], ["ip", "-n", name, "link", "set", "lo", "up"]):
            res = self.run_inside(argv)
            if res.returncode != 0:
                raise RuntimeError(f"{argv}: {res.stderr.strip()}")
            if argv[2] == "add":
                self.made_netns.append(name)
        return f"/run/netns/{name}"

    # --- its life -----------------------------------------------------------------------------

    def boot(self) -> None:
        self.start_holder()

    def power_off(self) -> None:
        """Every process of the node killed, every mount gone, /run and the other volatile dirs
        emptied, the cgroups removed; the disk kept."""
        self._kill_leftovers()
        self._stop_holder()  # its namespace held every mount: netns, rootfs, /run
        self._remove_cgroups()
        for sub in self.volatile:
            shutil.rmtree(self.tmp / sub)
            (self.tmp / sub).mkdir()

    def teardown(self) -> list[str]:
        """Remove everything this node made; return what could not be removed."""
        problems: list[str] = []
        for step in self.teardown_steps():
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - every step must run; each failure is reported
                problems.append(f"{step.__name__}: {exc!r}")
        return problems

    def teardown_steps(self) -> list[Callable[[], None]]:
        return [self._delete_netns, self._kill_leftovers, self._stop_holder,
                self._remove_cgroups, self._remove_tmp]

    # --- finding and ending what it left ------------------------------------------------------

    def _namespace_pids(self) -> list[int]:
        if self.holder is None or not pid_alive(self.holder.pid):
            return []
        ns = self.mount_ns()
        found = []
        for pid in all_pids():
            if pid in (self.holder.pid, os.getpid()):
                continue
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/ns/mnt") == ns:
                    found.append(pid)
        return found

    def _cgroup_dirs(self) -> list[Path]:
        root = Path("/sys/fs/cgroup")
        tops = [root / self.name, *(d / self.name for d in root.iterdir() if d.is_dir())]
        return [top for top in tops if top.is_dir()]

    def _cgroup_pids(self) -> list[int]:
        pids: set[int] = set()
        for top in self._cgroup_dirs():
            for procs in top.rglob("cgroup.procs"):
                with contextlib.suppress(OSError):
                    pids.update(int(p) for p in procs.read_text().split())
        return sorted(pids)

    def _kill_leftovers(self) -> None:
        """Every process in the node's namespace or cgroups, looked for again until none is
        left: a process that forks while it is killed (a Go daemon exec'ing a delegate in one
        thread as SIGKILL reaches the others) leaves a child the first look missed, and its
        cgroup could not be removed."""
        pids: list[int] = []
        for _ in range(10):
            pids = sorted(set(self._namespace_pids()) | set(self._cgroup_pids()))
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            wait_gone(pids, "the node's processes to exit")
        raise RuntimeError(f"processes of node {self.name} keep appearing: "
                           f"{[_described(p) for p in pids]}")

    def _delete_netns(self) -> None:
        if self.holder is None or self.holder.poll() is not None:
            self.made_netns.clear()  # gone with the namespace that held their mounts
            return
        failed = []
        for name in self.made_netns:
            res = self.run_inside(["ip", "netns", "del", name])
            if res.returncode != 0:
                failed.append(f"netns {name}: {res.stderr.strip()}")
        self.made_netns.clear()
        if failed:
            raise RuntimeError("; ".join(failed))

    def _stop_holder(self) -> None:
        if self.holder is None:
            return
        holders.stop(self.holder)
        self.holder = None

    def _remove_cgroups(self) -> None:
        for top in self._cgroup_dirs():
            for sub in sorted(top.rglob("*"), key=lambda p: len(p.parts), reverse=True):
                if sub.is_dir():
                    sub.rmdir()
            top.rmdir()

    def _remove_tmp(self) -> None:
        mounts = Path("/proc/self/mountinfo").read_text(encoding="utf-8")
        if str(self.tmp) in mounts:
            raise RuntimeError(f"mounts under {self.tmp} are still there; leaving it")
        shutil.rmtree(self.tmp)


def _described(pid: int) -> str:
    """pid, its threads' states and its command line, for an error message."""
    try:
        states = sorted({Path(f"/proc/{pid}/task/{t}/stat").read_text().rsplit(")", 1)[1].split()[0]
                         for t in os.listdir(f"/proc/{pid}/task")})
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError as exc:
        return f"{pid} ({exc.strerror})"
    return f"{pid} {''.join(states)} {argv}"
