"""A node's mount namespace for tests that run CNI without a runtime: the test's own /run,
/var/lib/cni and /var/log, held by one process, entered with nsenter by everything the node runs.

What a node of the CRI e2e suite is (tests/e2e_cri/node.py) without the runtime:
multus-daemon, cnitool and the network namespaces all live in one mount namespace, so

- a network namespace made with `ip netns add` inside it (a mount under the node's /run/netns) is
  seen at once by a daemon that started before it (no mount propagation needed: one namespace);
- libcni's cache and multus's cache (/var/lib/cni, /var/lib/cni/multus) are the test's dirs;
- a daemon's service account files (/run/secrets/kubernetes.io/serviceaccount, which
  multus-daemon's in-cluster client reads) are written under the node's /run, not the host's.

`close()` deletes the network namespaces made here, ends every process still in the namespace
and the holder (its mounts go with it), and removes the temp dir.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import holder
from tests.support.netns import unique_name
from tests.support.waiting import all_pids, wait_gone

BINDS = (("run", "/run"), ("var-lib-cni", "/var/lib/cni"), ("var-log", "/var/log"))


@dataclass
class NodeNS:
    tmp: Path
    holder: subprocess.Popen[str] | None = None
    netns: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, prefix: str = "dgmu-") -> NodeNS:
        # Short: unix socket paths (multus-daemon's) are limited to 108 bytes.
        node = cls(Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp")))
        for sub, _ in BINDS:
            (node.tmp / sub).mkdir(mode=0o755)
        try:
            node.holder = holder.start([(node.tmp / sub, dst) for sub, dst in BINDS])
        except BaseException:
            node.close()
            raise
        return node

    @property
    def mnt(self) -> str:
        assert self.holder is not None
        return f"/proc/{self.holder.pid}/ns/mnt"

    @property
    def enter(self) -> tuple[str, ...]:
        """The argv prefix that runs a command in the node (nsenter execs it in place)."""
        assert self.holder is not None
        return holder.enter(self.holder)

    @property
    def cni_cache(self) -> Path:
        """What /var/lib/cni is inside the node."""
        return self.tmp / "var-lib-cni"

    def run(self, argv: list[str], timeout: float = 60,
            env: dict[str, str] | None = None, stdin: str | None = None,
            ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.enter, *argv], capture_output=True, text=True, env=env,
                              input=stdin, timeout=timeout, check=False)

    def add_netns(self, prefix: str = "dgmu") -> str:
        """A new network namespace inside the node, lo up; returns its path there."""
        name = unique_name(prefix)
        for argv in (["ip", "netns", "add", name], ["ip", "-n", name, "link", "set", "lo", "up"]):
            res = self.run(argv)
            if res.returncode != 0:
                raise RuntimeError(f"{argv}: {res.stderr.strip()}")
            if argv[2] == "add":
                self.netns.append(name)
        return f"/run/netns/{name}"

    def _pids_inside(self) -> list[int]:
        """Processes in the node's mount namespace, the holder left out."""
        assert self.holder is not None
        mine = os.readlink(self.mnt)
        found = []
        for pid in all_pids():
            if pid == self.holder.pid:
                continue
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/ns/mnt") == mine:
                    found.append(pid)
        return found

    def close(self) -> list[str]:
        """Undo everything; return what could not be undone."""
        errors: list[str] = []
        if self.holder is not None and self.holder.poll() is None:
            for name in self.netns:
                res = self.run(["ip", "netns", "del", name])
                if res.returncode != 0:
                    errors.append(f"netns {name}: {res.stderr.strip()}")
            left = self._pids_inside()
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            wait_gone(left, "the node's processes to exit")
            holder.stop(self.holder)
        self.netns.clear()
        shutil.rmtree(self.tmp, ignore_errors=True)
        return errors
