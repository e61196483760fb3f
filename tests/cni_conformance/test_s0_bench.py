"""Scenario 0: the bench itself, without the guard.

cnitool (built from Debian's source) drives Debian's bridge + host-local directly, in an inner
namespace, from the outer one. If this fails, the failures of the other scenarios say nothing
about the guard.
"""

from __future__ import annotations

import pytest

from tests.cni_conformance.checks import assert_attached, assert_detached, ok
from tests.cni_conformance.lab import REFERENCE_VERSIONS, Lab, has_check
from tests.support.cnitool import LIBCNI_CACHE_DIR, container_id

pytestmark = pytest.mark.netns
SCENARIO = "0 bench: cnitool+bridge, no guard"


@pytest.mark.parametrize("version", REFERENCE_VERSIONS)
def test_bridge_host_local_without_guard(lab: Lab, version: str) -> None:
    inner = lab.nets.new("i")
    bridge = lab.bridge()
    net = lab.conflist(version, [bridge])["name"]
    host_cache = LIBCNI_CACHE_DIR / "results" / f"{net}-{container_id(inner.path)}-eth0"

    result = ok(lab.tool.run("add", net, inner.path), "cnitool add")
    assert result["cniVersion"] == version
    assert_attached(lab, inner, net, result, bridge["bridge"])
    assert lab.tool.result_cache(net, inner.path).is_file()
    assert not host_cache.exists(), "libcni cache leaked to the host's /var/lib/cni"
    if has_check(version):
        ok(lab.tool.run("check", net, inner.path), "cnitool check")

    ok(lab.tool.run("del", net, inner.path), "cnitool del")
    assert_detached(lab, inner, net, bridge["bridge"])
    assert not lab.tool.result_cache(net, inner.path).exists()
    ok(lab.tool.run("del", net, inner.path), "second cnitool del")
