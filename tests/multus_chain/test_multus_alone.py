"""What real multus v4.3.0 does on DEL in front of a kube-ovn-like delegate, without the guard.

cnitool in the node plays the runtime: ADD, then DEL (StopPodSandbox's), DEL again (containerd's
RemovePodSandbox: multus's cache is gone by then), then DEL once the pod is gone from the API. One
row per multus form (tests/support/multusnode.FORMS), saying for every DEL while the pod is in the
API what the runtime sees, whether kube-ovn still gets its `server_socket`, and what kube-ovn
answers; the reasons, with multus's file:line, are in tests/support/multus.py's header. In no form
does a DEL with multus's cache succeed and the same DEL without it fail: the cache makes no
difference to what kube-ovn gets.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from tests.support.chains import Behaviour
from tests.support.cnitool import Outcome
from tests.support.multusnode import MultusNode, Sandbox
from tests.support.waiting import descendants, wait_for, wait_gone

pytestmark = pytest.mark.netns
MISSING = "server_socket is required in cni.conf"


@dataclass(frozen=True)
class Dels:
    """Every DEL of a sandbox whose pod is still in the API, cache or not."""

    runtime_ok: bool  # what the runtime sees
    complete: bool  # kube-ovn's config still holds server_socket
    kube_ovn_ok: bool  # kube-ovn's own answer


ROWS = [
    # the thin entrypoint's 00-multus.conf: delegates inline keep their raw bytes on every path
    pytest.param("thin-inline", Dels(True, True, True), id="thin-inline"),
    # clusterNetwork as the conflist's path: re-marshalled, server_socket dropped on every DEL
    pytest.param("thin-clusterNetwork-path", Dels(False, False, False),
                 id="thin-clusterNetwork-path"),
    # the same load as the path form; the shim answers 0 whatever the daemon says
    pytest.param("thick", Dels(True, False, False), id="thick"),
]


def kube_ovn_dels(mnode: MultusNode, box: Sandbox) -> list[dict[str, object]]:
    """kube-ovn's answers to DEL for this sandbox (its record's `end` lines), in order."""
    assert mnode.chain.kube_ovn is not None
    return mnode.chain.kube_ovn.calls("DEL", box.cid, phase="end")


def check_del(mnode: MultusNode, box: Sandbox, out: Outcome, expect: Dels, nth: int) -> None:
    assert (out.rc == 0) is expect.runtime_ok, out.describe()
    if not expect.runtime_ok:
        assert MISSING in out.stdout + out.stderr, out.describe()
    calls = mnode.chain.calls("DEL", box.cid)
    assert len(calls) == nth, f"kube-ovn got {len(calls)} DELs, not {nth}"
    stdin = calls[-1]["stdin"]
    assert ("server_socket" in stdin) is expect.complete, stdin
    answer = kube_ovn_dels(mnode, box)[-1]
    assert (answer["rc"] == 0) is expect.kube_ovn_ok, answer
    if not expect.kube_ovn_ok:
        assert MISSING in str(answer["stdout"])


@pytest.mark.parametrize(("mnode", "expect"), ROWS, indirect=["mnode"])
def test_add_del_del_then_pod_gone(mnode: MultusNode, expect: Dels) -> None:
    net, box = mnode.network(guard=False), mnode.sandbox()
    add = mnode.cnitool("add", net, box)
    assert add.rc == 0, add.describe()
    [added] = mnode.chain.calls("ADD", box.cid)
    assert "server_socket" in added["stdin"], "ADD always gets kube-ovn's whole config"
    assert mnode.multus_cache(box).exists(), "multus saves its cache at ADD"

    check_del(mnode, box, mnode.cnitool("del", net, box), expect, 1)
    assert not mnode.multus_cache(box).exists(), "multus drops its cache after any DEL"
    assert mnode.chain.kube_ovn is not None
    assert mnode.chain.kube_ovn.holds(box.cid) is not expect.kube_ovn_ok, "state left iff failed"
    check_del(mnode, box, mnode.cnitool("del", net, box), expect, 2)

    mnode.set_pod(box, False)
    gone = mnode.cnitool("del", net, box)
    assert gone.rc == 0, gone.describe()
    assert len(mnode.chain.calls("DEL", box.cid)) == 2, "no cache, no pod: no delegate called"
    assert mnode.multus_dels(box) == 3, "multus handled every DEL"


@pytest.mark.parametrize(("mnode", "expect"), ROWS, indirect=["mnode"])
def test_del_of_a_sandbox_never_added(mnode: MultusNode, expect: Dels) -> None:
    """A stale sandbox (ADD never reached multus): with its pod in the API multus rebuilds the
    delegates and calls kube-ovn as it would after a cache; without it, nothing is called."""
    net, live, gone = mnode.network(guard=False), mnode.sandbox(), mnode.sandbox(in_api=False)
    check_del(mnode, live, mnode.cnitool("del", net, live), expect, 1)
    out = mnode.cnitool("del", net, gone)
    assert out.rc == 0, out.describe()
    assert mnode.chain.calls("DEL", gone.cid) == []
    assert mnode.multus_dels() == 2


@pytest.mark.parametrize("mnode", ["thin-inline"], indirect=True)
def test_thin_inline_fails_only_while_kube_ovns_daemon_is_down(mnode: MultusNode) -> None:
    """The one way the entrypoint's thin form fails a DEL: kube-ovn's daemon not answering
    (code 11, "RPC failed"); the same DEL succeeds once it is back."""
    assert mnode.chain.kube_ovn is not None
    net, box = mnode.network(guard=False), mnode.sandbox()
    mnode.chain.kube_ovn.daemon(False)
    for _ in range(2):
        out = mnode.cnitool("del", net, box)
        assert out.rc != 0 and "RPC failed" in out.stdout + out.stderr, out.describe()
    mnode.chain.kube_ovn.daemon(True)
    out = mnode.cnitool("del", net, box)
    assert out.rc == 0, out.describe()
    assert [c["rc"] for c in kube_ovn_dels(mnode, box)] == [1, 1, 0]


@pytest.mark.parametrize("mnode", ["thick"], indirect=True)
def test_thick_stop_ends_a_delegate_the_daemon_still_runs(mnode: MultusNode) -> None:
    """A kube-ovn whose daemon RPC hangs (Behaviour.hang, on ADD: in thick a DEL's config fails
    kube-ovn's check before any RPC) is the daemon's child: stopping the chain's daemon ends it
    too, and the shim's ADD fails rather than hanging on."""
    net = mnode.network(guard=False, behaviour=Behaviour(hang=("ADD",)))
    box = mnode.sandbox()
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(mnode.exec_plugin, "ADD", net, box)
        wait_for(lambda: mnode.chain.calls("ADD", box.cid), "kube-ovn to be asked to ADD")
        daemon = mnode.thick.daemon
        assert daemon is not None
        hanging = descendants(daemon.pid)
        assert hanging, "the daemon runs kube-ovn, which hangs"
        mnode.thick.stop_daemon()
        wait_gone(hanging, "the hanging kube-ovn to be ended with the daemon")
        out = pending.result(timeout=120)
    assert out.rc != 0, out.describe()
    assert mnode.chain.kube_ovn is not None
    assert mnode.chain.kube_ovn.calls("ADD", box.cid, phase="end") == [], "it never answered"
