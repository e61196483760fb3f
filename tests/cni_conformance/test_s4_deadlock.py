"""Scenario 4: the deadlock, both ways, and the reverse guarantee.

The stand-in delegate (tests/fakes/stale_delegate.py) fails DEL when it holds no state, like
kube-ovn's "server_socket is required in cni.conf". Without the guard, DEL of a never-added
attachment fails (the runtime keeps the sandbox forever); with the guard it succeeds and the
delegate is not called. After a completed ADD, though, a failing delegate DEL must reach the
runtime: swallowing it would leak real state. A multus cache alone (an ADD the guard never saw,
which multus's cache proves was attempted, not completed) forwards the DEL and ignores a failure:
that frees a sandbox stuck before the guard was installed.
"""

from __future__ import annotations

import pytest

from tests.cni_conformance.checks import failed, ok
from tests.cni_conformance.lab import VERSIONS, Lab
from tests.support.cnitool import container_id
from tests.support.recorder import read_records

pytestmark = pytest.mark.netns
SCENARIO = "4 deadlock"
STALE_MSG = "server_socket is required in cni.conf"


@pytest.mark.parametrize("version", VERSIONS)
def test_deadlock_without_guard_broken_with_guard(lab: Lab, version: str) -> None:
    inner = lab.nets.new("i")
    bare = lab.conflist(version, [lab.fake()])
    out = lab.runner(bare).delete(inner.path)
    failed(out, "DEL straight to the stale delegate")
    assert STALE_MSG in out.stdout + out.stderr
    assert len(lab.fake_calls("DEL")) == 1

    guarded = lab.conflist(version, [lab.guard(lab.fake())])
    ok(lab.runner(guarded).delete(inner.path), "DEL through the guard")
    assert len(lab.fake_calls("DEL")) == 1, "the guard called the delegate"
    assert lab.state_files() == []


@pytest.mark.parametrize("version", VERSIONS)
def test_delegate_del_error_after_completed_add_is_propagated(lab: Lab, version: str) -> None:
    record = lab.recorder("rec-fake", "stale-delegate")
    conf = lab.conflist(version, [lab.guard(lab.fake(type="rec-fake", failDel=5))])
    net, inner, runner = conf["name"], lab.nets.new("i"), lab.runner(conf)
    ok(runner.add(inner.path), "add")

    out = runner.delete(inner.path)
    failed(out, "DEL refused by the delegate after a completed ADD")
    assert "fake delegate: DEL refused" in out.stdout + out.stderr
    assert lab.markers(net) == {lab.key(inner.path): "completed"}, "marker lost on failure"
    stdin = dict(conf["plugins"][0], name=net, cniVersion=version)
    direct = lab.exec_guard("DEL", stdin, container_id(inner.path), inner.path, "eth0")
    failed(direct, "direct DEL, retried")
    assert direct.stdout == read_records(record, "end")[-1]["stdout"]
    assert direct.json()["code"] == 5


@pytest.mark.parametrize("version", VERSIONS)
def test_multus_cache_without_marker_is_lenient(lab: Lab, version: str) -> None:
    conf = lab.conflist(version, [lab.guard(lab.fake())])
    inner = lab.nets.new("i")
    (lab.tmp / "multus" / container_id(inner.path)).write_text("{}")

    ok(lab.runner(conf).delete(inner.path), "DEL with only multus evidence, delegate failing")
    assert len(lab.fake_calls("DEL")) == 1, "the delegate did not get the DEL"
    assert lab.state_files() == []
