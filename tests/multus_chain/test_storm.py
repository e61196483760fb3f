"""The DEL storm, counted where it lands: N repeated DELs of a sandbox whose ADD never happened
(what a kubelet's retry loop sends), its pod in the API, exec'd as libcni execs the plugin.

Without the guard every one is a multus run: a request to multus-daemon (thick; its own log's
count) or a multus process asking the API for the pod (thin), and a kube-ovn exec. With the
guard in front, none. Counts only; what each DEL costs is benchmarks/multus_storm.py's.
"""

from __future__ import annotations

import pytest

from tests.support.multusnode import MultusNode

pytestmark = pytest.mark.netns
N = 12


@pytest.mark.parametrize("mnode", ["thin-inline", "thick"], indirect=True)
def test_storm_reaches_multus_only_without_the_guard(mnode: MultusNode) -> None:
    assert mnode.chain.api is not None
    bare, guarded = mnode.network(guard=False), mnode.network(guard=True)
    box = mnode.sandbox()
    gets_before = mnode.chain.api.count("GET", "pods")
    for _ in range(N):
        out = mnode.exec_plugin("DEL", guarded, box)
        assert out.rc == 0, out.describe()
    assert mnode.multus_dels(box) == 0
    assert mnode.chain.calls("DEL", box.cid) == []
    assert mnode.chain.api.count("GET", "pods") == gets_before

    for _ in range(N):
        mnode.exec_plugin("DEL", bare, box)
    assert mnode.multus_dels(box) == N
    assert len(mnode.chain.calls("DEL", box.cid)) == N
    gets = mnode.chain.api.count("GET", "pods") - gets_before
    # thin asks the API for the pod on every DEL; the daemon reads its informer's cache
    assert gets == (0 if mnode.form == "thick" else N), gets
