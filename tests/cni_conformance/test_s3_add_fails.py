"""Scenario 3: an ADD that fails in the delegate.

The delegate's error code and message reach the runtime unchanged (the guard's stdout is the
delegate's own bytes, compared against the recording wrapper), the following DEL succeeds, and
nothing leaks: no lease, no marker, no lock, no libcni cache.
"""

from __future__ import annotations

import json

import pytest

from tests.cni_conformance.checks import failed, ok
from tests.cni_conformance.lab import REFERENCE_VERSIONS, VERSIONS, Lab
from tests.support.cnitool import container_id
from tests.support.recorder import read_records

pytestmark = pytest.mark.netns
SCENARIO = "3 add fails in delegate"
ONE_ADDRESS = {"rangeStart": "10.77.0.10", "rangeEnd": "10.77.0.10"}


@pytest.mark.parametrize("version", REFERENCE_VERSIONS)
def test_exhausted_host_local_range(lab: Lab, version: str) -> None:
    record, bridge = lab.recorded_bridge(**ONE_ADDRESS)
    conf = lab.conflist(version, [lab.guard(bridge)])
    net, runner = conf["name"], lab.runner(conf)
    first, second, third = lab.nets.new("a"), lab.nets.new("b"), lab.nets.new("c")
    ok(runner.add(first.path), "add taking the only address")

    out = runner.add(second.path)
    failed(out, "add with the range exhausted")
    [delegate_end] = [e for e in read_records(record, "end") if e["command"] == "ADD" and e["rc"]]
    delegate_error = json.loads(delegate_end["stdout"])
    assert delegate_error["msg"] in out.stderr + out.stdout
    # The same failure exec'd directly: the guard prints the delegate's error bytes verbatim.
    stdin = dict(conf["plugins"][0], name=net, cniVersion=version)
    direct = lab.exec_guard("ADD", stdin, container_id(third.path), third.path, "eth0")
    failed(direct, "direct add with the range exhausted")
    last_end = [e for e in read_records(record, "end") if e["command"] == "ADD"][-1]
    assert direct.stdout == last_end["stdout"]
    assert direct.json()["code"] == delegate_error["code"]

    ok(runner.delete(second.path), "del after the failed add")
    ok(runner.delete(third.path), "del after the failed direct add")
    assert lab.leases(net) == ["10.77.0.10"], "only the first attachment may hold a lease"
    assert not runner.cache_path(container_id(second.path), "eth0").exists()
    assert lab.markers(net) == {lab.key(first.path): "completed"}
    ok(runner.delete(first.path), "del of the first attachment")
    assert lab.leases(net) == []
    assert lab.state_files() == []


@pytest.mark.parametrize("version", VERSIONS)
def test_fake_delegate_add_error_passes_through(lab: Lab, version: str) -> None:
    record = lab.recorder("rec-fake", "stale-delegate")
    conf = lab.conflist(version, [lab.guard(lab.fake(type="rec-fake", failAdd=11))])
    inner = lab.nets.new("i")
    stdin = dict(conf["plugins"][0], name=conf["name"], cniVersion=version)

    out = lab.exec_guard("ADD", stdin, container_id(inner.path), inner.path, "eth0")
    failed(out, "add refused by the delegate")
    [add_end] = [e for e in read_records(record, "end") if e["command"] == "ADD"]
    assert out.stdout == add_end["stdout"]
    assert out.json()["code"] == 11
    assert out.json()["msg"] == "fake delegate: ADD refused"

    ok(lab.runner(conf).delete(inner.path), "del after the failed add")
    assert list(lab.fake_state.iterdir()) == []
    assert lab.state_files() == []
