"""The frozen guard in front of real multus v4.3.0 and the kube-ovn-like delegate.

- A DEL with no evidence of an ADD (the second DEL after a DEL that succeeded; a sandbox whose
  ADD never reached the guard) is answered at once: multus never runs (thin: no CmdDel in its log;
  thick: no request at the daemon) and kube-ovn is not called.
- A DEL whose ADD completed reaches multus and kube-ovn, and whatever multus answers comes back
  unchanged: kube-ovn's error in thin; in thick the shim's 0, since the shim never reports a DEL
  error (the guard cannot return an error that never reached it).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.support.chains import Behaviour
from tests.support.multusnode import MultusNode

pytestmark = pytest.mark.netns
MISSING = "server_socket is required in cni.conf"


@dataclass(frozen=True)
class Row:
    first_del_ok: bool  # what the runtime sees for the DEL after a completed ADD
    error: str  # what that DEL's error says when it fails


ROWS = [
    pytest.param("thin-inline", Row(True, ""), id="thin-inline"),
    pytest.param("thin-clusterNetwork-path", Row(False, MISSING), id="thin-clusterNetwork-path"),
    pytest.param("thick", Row(True, ""), id="thick"),
]


@pytest.mark.parametrize(("mnode", "row"), ROWS, indirect=["mnode"])
def test_double_del(mnode: MultusNode, row: Row) -> None:
    net, box = mnode.network(guard=True), mnode.sandbox()
    add = mnode.cnitool("add", net, box)
    assert add.rc == 0, add.describe()

    first = mnode.cnitool("del", net, box)
    assert (first.rc == 0) is row.first_del_ok, first.describe()
    assert row.error in first.stdout + first.stderr
    assert mnode.multus_dels(box) == 1, "the DEL after a completed ADD reaches multus"
    assert len(mnode.chain.calls("DEL", box.cid)) == 1
    [decided] = mnode.guard_log(command="DEL", containerID=box.cid)
    assert decided["decision"] == "forward-strict", decided

    second = mnode.cnitool("del", net, box)
    decisions = [r["decision"] for r in mnode.guard_log(command="DEL", containerID=box.cid)]
    if row.first_del_ok:
        # The first DEL succeeded: no evidence is left, so the second never reaches multus.
        assert second.rc == 0, second.describe()
        assert decisions == ["forward-strict", "skip"]
        assert mnode.multus_dels(box) == 1
        assert len(mnode.chain.calls("DEL", box.cid)) == 1
    else:
        # It failed: the ADD's evidence stays, and the strict DEL is tried again, its error
        # returned again (the release valve's case, not a deadlock the guard may break).
        assert second.rc != 0 and row.error in second.stdout + second.stderr, second.describe()
        assert decisions == ["forward-strict", "forward-strict"]
        assert mnode.multus_dels(box) == 2


@pytest.mark.parametrize("mnode", [r.values[0] for r in ROWS], indirect=True)
def test_stale_dels_never_reach_multus(mnode: MultusNode) -> None:
    """A sandbox whose ADD never happened, DEL'd again and again (a kubelet's retries), with its
    pod in the API (multus would rebuild its delegates) and without."""
    net = mnode.network(guard=True)
    boxes = [mnode.sandbox(), mnode.sandbox(in_api=False)]
    for box in boxes:
        for _ in range(3):
            out = mnode.cnitool("del", net, box)
            assert out.rc == 0, out.describe()
    assert mnode.multus_dels() == 0
    assert mnode.chain.calls("DEL") == []
    assert {r["decision"] for r in mnode.guard_log(command="DEL")} == {"skip"}
    assert len(mnode.guard_log(command="DEL")) == 6


@dataclass(frozen=True)
class Failing:
    runtime_ok: bool  # what the runtime gets
    complete: bool  # kube-ovn's DEL config holds server_socket (thick: never, see the header)


@pytest.mark.parametrize(
    ("mnode", "failing"),
    [pytest.param("thin-inline", Failing(runtime_ok=False, complete=True), id="thin-inline"),
     pytest.param("thick", Failing(runtime_ok=True, complete=False), id="thick")],
    indirect=["mnode"],
)
def test_kube_ovns_del_error_after_a_completed_add(mnode: MultusNode, failing: Failing) -> None:
    """kube-ovn refuses the DEL (its daemon's error, code 11; in thick its config is incomplete
    first, code 7): through the guard the runtime gets exactly what multus answers."""
    net, box = mnode.network(guard=True, behaviour=Behaviour(fail_del=11)), mnode.sandbox()
    assert mnode.cnitool("add", net, box).rc == 0
    out = mnode.cnitool("del", net, box)
    assert mnode.chain.kube_ovn is not None
    [asked] = mnode.chain.calls("DEL", box.cid)
    [answer] = mnode.chain.kube_ovn.calls("DEL", box.cid, phase="end")
    assert ("server_socket" in asked["stdin"]) is failing.complete
    said = "fake kube-ovn: DEL refused" if failing.complete else MISSING
    assert answer["rc"] == 1 and said in answer["stdout"], answer
    assert (out.rc == 0) is failing.runtime_ok, out.describe()
    if not failing.runtime_ok:
        assert said in out.stdout + out.stderr, out.describe()
    [decided] = mnode.guard_log(command="DEL", containerID=box.cid)
    assert decided["decision"] == "forward-strict"
