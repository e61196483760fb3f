"""The operator's tools (list, doctor, stats, release) as processes, the package and the frozen
binary, on a node left in hostile or careless state (issue 20): markers and log lines with numbers
no guard writes, odd dirs among the networks, paths in a conf or a flag that climb out of --root.
Every answer is a summary or one line and an exit code, never a traceback; every `--json` is
strict JSON (NaN and Infinity refused, as jq and Go refuse them)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.process.test_guard_process import bin_dir  # noqa: F401
from tests.support import guard
from tests.support.fakes import install_fake
from tests.support.nodestate import marker

OLD = 3600.0  # seconds: older than doctor's settle time and the ADD timeout
POD = {"namespace": "default", "name": "web"}


def _not_json(name: str) -> Any:
    raise AssertionError(f"{name} printed: not JSON")


def strict(text: str) -> Any:
    return json.loads(text, parse_constant=_not_json)


class Node:
    """A node under `root` (tmp/node/root, so that a path climbing out lands in tmp/node): the
    runtime's conf wrapped by the guard (extra guard keys as given), the guard under test and a
    fake multus in its bin dir, the guard's state and log at their default places."""

    def __init__(self, tmp: Path, **keys: object) -> None:
        self.beside = tmp / "node"
        self.root = self.beside / "root"
        self.bin = self.root / "opt/cni/bin"
        self.state = self.root / "var/lib/cni/delguard"
        self.results = self.root / "var/lib/cni/results"
        self.log = self.root / "var/log/cni-delguard/delguard.log"
        for d in (self.bin, self.root / "etc/cni/net.d", self.results, self.log.parent):
            d.mkdir(parents=True)
        self.state.mkdir(parents=True, mode=0o700)
        conf = {"cniVersion": "1.0.0", "name": "multus-cni-network", "type": "cni-delguard",
                "delegate": {"type": "multus"}, **keys}
        (self.root / "etc/cni/net.d/00-multus.conf").write_text(json.dumps(conf))
        guard.install_guard(self.bin)
        install_fake(self.bin, "multus")

    def tool(self, *argv: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.bin / "cni-delguard"), *argv],
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc

    def doctor(self, *extra: str) -> tuple[int, dict[str, Any]]:
        proc = self.tool("doctor", "--root", str(self.root), "--json", *extra)
        assert proc.returncode in (0, 1), proc.stderr
        return proc.returncode, strict(proc.stdout)

    def marker_text(self, network: str, key: str, text: str) -> Path:
        d = self.state / "networks" / network
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = d / f"{key}.json"
        path.write_text(text)
        path.chmod(0o600)
        return path


@pytest.fixture
def node(bin_dir, tmp_path) -> Node:  # noqa: F811 - bin_dir: the package or the frozen guard
    return Node(tmp_path)


# -- paths that climb out of --root -------------------------------------------------------------


def test_doctor_repair_never_leaves_the_root(node):
    """A conf's stateDir `/../var/lib/cni/delguard` is what the guard reads as
    /var/lib/cni/delguard: the quarantine goes there under the root, not beside it."""
    escaping = Node(node.beside.parent / "escaping", stateDir="/../var/lib/cni/delguard")
    torn = escaping.results / "net1-c9-eth0"
    torn.write_text("{}")
    os.utime(torn, (time.time() - OLD, time.time() - OLD))
    code, report = escaping.doctor("--repair")
    [fixed] = [f for f in report["findings"] if f["check"] == "libcni"]
    quarantine = escaping.state / "quarantine"
    assert fixed["repaired"].startswith(f"moved to {quarantine}/net1-c9-eth0."), fixed
    [moved] = quarantine.iterdir()
    assert moved.name.startswith("net1-c9-eth0.")
    assert sorted(os.listdir(escaping.beside)) == ["root"]
    assert code == 0


def test_release_state_dir_never_leaves_the_root(node):
    marker(node.state, "net1", "c1", "completed", time.time(), pod=POD)
    decoy = node.beside / "var/lib/cni/delguard"  # where root + "/../var/..." used to land
    marker(decoy, "net1", "c1", "completed", time.time(), pod=POD)
    done = node.tool("release", "--root", str(node.root), "--state-dir",
                     "/../var/lib/cni/delguard", "--container", "c1")
    assert done.returncode == 0, done.stderr
    assert (node.state / "networks/net1/c1:eth0.release").exists()
    assert not list(decoy.rglob("*.release"))
