"""A node for tests that run CNI without a runtime: tests/support/node.py's Node with the test's
own /run, /var/lib/cni and /var/log, entered with nsenter by everything the node runs.

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

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from tests.support import node as base


@dataclass
class NodeNS(base.Node):
    prefix: ClassVar[str] = "dgmu-"  # short: multus-daemon's socket path is under it
    own: ClassVar[tuple[tuple[str, str], ...]] = (
        ("run", "/run"), ("var-lib-cni", "/var/lib/cni"), ("var-log", "/var/log"))

    @classmethod
    def create(cls, prefix: str = "dgmu-") -> NodeNS:
        node = cls.make(prefix)
        try:
            node.start_holder()
        except BaseException:
            node.close()
            raise
        return node

    @property
    def mnt(self) -> str:
        assert self.holder is not None
        return f"/proc/{self.holder.pid}/ns/mnt"

    @property
    def cni_cache(self) -> Path:
        """What /var/lib/cni is inside the node."""
        return self.tmp / "var-lib-cni"

    def run(self, argv: list[str], timeout: float = 60,
            env: dict[str, str] | None = None, stdin: str | None = None,
            ) -> subprocess.CompletedProcess[str]:
        return self.run_inside(argv, timeout=timeout, env=env, stdin=stdin)

    def add_netns(self, prefix: str = "dgmu") -> str:
        return super().add_netns(prefix)

    def close(self) -> list[str]:
        """Undo everything; return what could not be undone."""
        return self.teardown()

