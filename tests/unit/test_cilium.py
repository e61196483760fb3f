"""tests/support/cilium.py: cilium-agent's life on a reported-stack node, in a node's own mount
namespace (tests/support/nodens.py: its /run is the test's, never the host's /run/cilium).

Up, it has written 05-cilium.conflist; down (SIGTERM), its socket is gone and its queue dir stays;
booting, the socket comes only `after` seconds later; killed with the node, it is reaped; each
endpoint deletion that reached its API is counted by container.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cilium import CiliumAgent
from tests.support.daemon import unix_http_status
from tests.support.nodens import NodeNS
from tests.support.waiting import wait_for


@pytest.fixture
def node() -> Iterator[NodeNS]:
    n = NodeNS.create(prefix="dgcl-")
    try:
        yield n
    finally:
        n.close()


def agent_on(node: NodeNS) -> CiliumAgent:
    work = node.tmp / "work"
    work.mkdir()
    return CiliumAgent(work, node.tmp / "run", node.tmp / "05-cilium.conflist")


def socket_of(agent: CiliumAgent) -> Path:
    return agent.run / "cilium" / "cilium.sock"


def delete(node: NodeNS, container: str) -> int:
    """A DELETE /v1/endpoint as the plugin sends it, from inside the node; its status."""
    body = json.dumps({"container-id": container})
    res = node.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket",
                    "/run/cilium/cilium.sock", "-X", "DELETE", "-H",
                    "Content-Type: application/json", "--data", body,
                    "http://localhost/v1/endpoint"])
    return int(res.stdout or 0)


def test_up_writes_the_conflist_and_down_removes_the_socket(node: NodeNS) -> None:
    agent = agent_on(node)
    agent.start(node.enter)
    try:
        conf = json.loads(agent.conf.read_text(encoding="utf-8"))
        assert conf["name"] == "generic-veth"
        assert [p["type"] for p in conf["plugins"]] == ["kube-ovn", "portmap", "cilium-cni"]
        assert unix_http_status(socket_of(agent), "http://localhost/v1/healthz") == 200
        assert delete(node, "c1") == 404  # no such endpoint: the plugin counts it done
        assert (agent.deletes(), agent.deletes("c1"), agent.deletes("c2")) == (1, 1, 0)
    finally:
        agent.stop()
    assert not socket_of(agent).exists()
    assert (agent.run / "cilium" / "deleteQueue").is_dir(), "the queue outlives the agent"
    assert agent.conf.exists(), "the conflist is never removed on stop"


def test_booting_serves_only_after_its_delay(node: NodeNS) -> None:
    agent = agent_on(node)
    agent.start(node.enter, after=3)
    try:
        assert agent.replayed() == 0
        assert not socket_of(agent).exists(), "a booting agent has no socket yet"
        wait_for(lambda: unix_http_status(socket_of(agent), "http://localhost/v1/healthz")
                 == 200, "the booted agent's API", timeout=60, every=0.2)
    finally:
        node.power_off()  # it dies with its node, and is reaped
        agent.node_down()
    assert agent.proc is None
