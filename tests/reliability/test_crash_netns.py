"""The crash points again, with Debian's bridge + host-local doing the work in a real netns.

The gated fake wraps the real bridge plugin (its `target`), so the guard is killed while real
kernel state (a veth, an address) and host-local's on-disk lease exist. After the next DEL,
host-local's dataDir must hold no lease and the container namespace no interface but lo.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability import fangate
from tests.reliability.harness import Bench, marker_problems
from tests.reliability.test_crash import CID, POINTS, Point, assert_recovers, crash
from tests.support import netns

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(netns.available() is not None, reason=str(netns.available())),
    pytest.mark.skipif(fangate.available() is not None, reason=str(fangate.available())),
]

BRIDGE = Path("/usr/lib/cni/bridge")
NETWORK = "net1"
REAL_POINTS = [p for p in POINTS if p.id in {
    "add-before-delegate", "add-delegate-running", "add-delegate-returned",
    "add-writing-completed", "add-before-reply", "del-delegate-starting", "del-delegate-done",
    "del-delegate-returned", "del-before-reply",
}]


class NetBench:
    def __init__(self, bench: Bench, outer: netns.Netns, inner: netns.Netns) -> None:
        self.bench = bench
        self.outer = outer
        self.inner = inner
        self.data_dir = bench.root / "host-local"

    def delegate(self, gates: list[str]) -> dict[str, Any]:
        return self.bench.gated(
            target=str(BRIDGE), gates=gates, bridge=f"brc{self.outer.name[-8:]}",
            isGateway=True, ipMasq=False,
            ipam={"type": "host-local", "ranges": [[{"subnet": "10.78.0.0/24"}]],
                  "dataDir": str(self.data_dir)},
        )

    def leases(self) -> list[str]:
        ndir = self.data_dir / NETWORK
        if not ndir.exists():
            return []
        return sorted(p.name for p in ndir.iterdir() if p.name[0].isdigit())

    def container_links(self) -> list[str]:
        return sorted(self.inner.links())


@pytest.fixture
def netbench(bench: Bench) -> Iterator[NetBench]:
    if not BRIDGE.exists():
        pytest.skip("Debian's containernetworking-plugins are not installed")
    nets = netns.NetnsSet(prefix="dgr")
    try:
        outer, inner = nets.new("o"), nets.new("c")
        for plugin in ("host-local", "loopback"):
            (bench.bin_dir / plugin).symlink_to(BRIDGE.parent / plugin)
        bench.prefix = outer.exec_argv([])
        bench.netns = str(inner.path)
        yield NetBench(bench, outer, inner)
    finally:
        bench.cleanup()
        assert nets.close() == []


@pytest.mark.parametrize("point", REAL_POINTS)
def test_sigkill_with_bridge_and_host_local(netbench: NetBench, point: Point,
                                            figures: Any) -> None:
    bench = netbench.bench
    gates = [f"{point.command}:{point.arg}"] if point.how in ("gate", "returned") else []
    plain = bench.conf(netbench.delegate([]))
    if point.command == "DEL":
        add = bench.run("ADD", plain, CID)
        assert add.rc == 0, add.describe()
        assert len(netbench.leases()) == 1
    delegates = crash(bench, point, bench.conf(netbench.delegate(gates)))
    assert marker_problems(bench.state_dir) == []
    leased = len(netbench.leases())
    assert leased == int(point.fake_state), "the crash did not land where meant"
    outlived = assert_recovers(bench, plain, delegates)
    assert netbench.leases() == [], "host-local still holds a lease"
    assert netbench.container_links() == ["lo"], "an interface was left in the container netns"
    figures.add("bridge crash", leases_after_crash=leased, leases_after_del=0,
                delegate_outlived_s=round(outlived, 3))
