"""Scenario 2: DEL for an attachment that never had an ADD.

The guard answers success at once and never calls the delegate (proved by the recording wrapper
and the fake's record file: no invocation at all), leaving no file behind. Broken input must not
change that: a missing delegate binary or an unparseable config still gets exit 0 when nothing was
ever added, or removal would deadlock on a config error.
"""

from __future__ import annotations

import pytest

from tests.cni_conformance.checks import ok
from tests.cni_conformance.lab import REFERENCE_VERSIONS, VERSIONS, Lab
from tests.support.cnitool import container_id

pytestmark = pytest.mark.netns
SCENARIO = "2 del, never added"


@pytest.mark.parametrize("version", REFERENCE_VERSIONS)
def test_del_never_added_skips_bridge(lab: Lab, version: str) -> None:
    record, bridge = lab.recorded_bridge()
    conf = lab.conflist(version, [lab.guard(bridge)])
    inner = lab.nets.new("i")

    ok(lab.runner(conf).delete(inner.path), "del of a never-added attachment")
    assert lab.calls(record) == [], "the delegate was called"
    assert lab.state_files() == []
    assert bridge["bridge"] not in lab.outer.links()
    [line] = lab.log_lines(command="DEL")
    assert line["decision"] == "skip"
    assert line["containerID"] == container_id(inner.path)


@pytest.mark.parametrize("version", VERSIONS)
def test_del_never_added_skips_fake(lab: Lab, version: str) -> None:
    conf = lab.conflist(version, [lab.guard(lab.fake())])
    inner = lab.nets.new("i")
    runner = lab.runner(conf)

    ok(runner.delete(inner.path), "del")
    ok(runner.delete(inner.path), "repeated del")
    assert lab.fake_calls() == [], "the delegate was called"
    assert lab.state_files() == []


@pytest.mark.parametrize("version", VERSIONS)
def test_del_never_added_with_missing_delegate(lab: Lab, version: str) -> None:
    conf = lab.conflist(version, [lab.guard({"type": "no-such-plugin"})])
    inner = lab.nets.new("i")
    ok(lab.runner(conf).delete(inner.path), "del with a delegate binary that does not exist")
    assert lab.state_files() == []


@pytest.mark.parametrize("version", VERSIONS)
def test_del_never_added_with_unusable_config(lab: Lab, version: str) -> None:
    """Configs the guard would refuse for ADD: DEL still succeeds when nothing was added."""
    inner = lab.nets.new("i")
    cid = container_id(inner.path)
    bad_guard = lab.guard(lab.fake(), timeouts="soon", lockTimeout=-1)
    stdin = dict(bad_guard, name=lab.unique("net"), cniVersion=version)
    assert lab.exec_guard("ADD", stdin, cid, inner.path, "eth0").rc != 0, "ADD accepted it"
    ok(lab.exec_guard("DEL", stdin, cid, inner.path, "eth0"), "DEL, invalid guard keys")
    no_delegate = {k: v for k, v in stdin.items() if k != "delegate"}
    ok(lab.exec_guard("DEL", no_delegate, cid, inner.path, "eth0"), "DEL, no delegate key")
    ok(lab.exec_guard("DEL", b"{not json", cid, inner.path, "eth0"), "DEL, garbage stdin")
    assert lab.fake_calls() == []
    assert lab.state_files() == []
