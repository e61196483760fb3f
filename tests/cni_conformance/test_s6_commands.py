"""Scenario 6: VERSION, GC, STATUS, and the error codes of bad input.

GC and STATUS are spec 1.1.0 commands that Debian's cnitool does not have: they are exec'd the
way libcni does (CNI_COMMAND, CNI_PATH, the network config on stdin; GC's carries
`cni.dev/valid-attachments`). GC forwards to the delegate and prunes the markers of attachments
not listed (none when the key is absent); STATUS passes the delegate's answer through. Older
configs get code 1 for them. Bad input gets CNI error JSON with the spec's code, never a traceback,
and the delegate is not called.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cni_conformance.checks import failed, ok
from tests.cni_conformance.lab import VERSIONS, Lab
from tests.support.cniexec import gc_conf, version_tuple
from tests.support.cnitool import Outcome
from tests.support.recorder import read_records

pytestmark = pytest.mark.netns
SCENARIO = "6 version/gc/status/errors"
NOT_AVAILABLE = {"cniVersion": "1.1.0", "code": 50, "msg": "delegate: not available"}


def cni_error(out: Outcome, code: int | set[int]) -> dict[str, Any]:
    """Assert a well-formed CNI error with the expected code; return it."""
    failed(out, f"input that should get code {code}")
    assert "Traceback" not in out.stderr, out.stderr
    body = out.json()
    assert {"cniVersion", "code", "msg"} <= set(body), body
    assert body["code"] in (code if isinstance(code, set) else {code}), out.describe()
    return dict(body)


def stdin_of(conf: dict[str, Any]) -> dict[str, Any]:
    return dict(conf["plugins"][0], name=conf["name"], cniVersion=conf["cniVersion"])


def add(lab: Lab, conf: dict[str, Any], cid: str) -> None:
    ok(lab.exec_guard("ADD", stdin_of(conf), cid, lab.outer.path, "eth0"), f"ADD {cid}")


@pytest.mark.parametrize("version", VERSIONS)
def test_version(lab: Lab, version: str) -> None:
    out = lab.exec_guard("VERSION", {"cniVersion": version})
    body = ok(out, "VERSION")
    assert set(VERSIONS) <= set(body["supportedVersions"])
    assert body["cniVersion"] in VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
def test_gc(lab: Lab, version: str) -> None:
    conf = lab.conflist(version, [lab.guard(lab.fake())])
    net = conf["name"]
    for cid in ("keep-a", "keep-b", "stale-c"):
        add(lab, conf, cid)
    valid = [("keep-a", "eth0"), ("keep-b", "eth0")]
    gc_stdin = gc_conf(conf, conf["plugins"][0], valid)
    out = lab.exec_guard("GC", gc_stdin)
    if version_tuple(version) < (1, 1, 0):
        cni_error(out, 1)
        assert lab.fake_calls("GC") == []
        assert len(lab.markers(net)) == 3
        return
    ok(out, "GC")
    [call] = lab.fake_calls("GC")
    assert call["stdin"]["cni.dev/valid-attachments"] == gc_stdin["cni.dev/valid-attachments"]
    assert lab.markers(net) == {"keep-a:eth0": "completed", "keep-b:eth0": "completed"}
    assert not [f for f in lab.state_files() if "stale-c" in f], lab.state_files()

    ok(lab.exec_guard("GC", gc_conf(conf, conf["plugins"][0], None)), "GC without the key")
    assert len(lab.fake_calls("GC")) == 2
    assert set(lab.markers(net)) == {"keep-a:eth0", "keep-b:eth0"}, "pruned without a list"


@pytest.mark.parametrize("version", VERSIONS)
def test_status(lab: Lab, version: str) -> None:
    record = lab.recorder("rec-fake", "stale-delegate", answers={"STATUS": NOT_AVAILABLE})
    healthy = lab.conflist(version, [lab.guard(lab.fake())])
    sick = lab.conflist(version, [lab.guard(lab.fake(type="rec-fake"))])
    missing = lab.conflist(version, [lab.guard({"type": "no-such-plugin"})])
    if version_tuple(version) < (1, 1, 0):
        cni_error(lab.exec_guard("STATUS", stdin_of(healthy)), 1)
        assert lab.fake_calls("STATUS") == []
        return
    ok(lab.exec_guard("STATUS", stdin_of(healthy)), "STATUS, healthy delegate")
    assert len(lab.fake_calls("STATUS")) == 1

    out = lab.exec_guard("STATUS", stdin_of(sick))
    cni_error(out, 50)
    assert out.stdout == read_records(record, "end")[-1]["stdout"], "answer not passed through"
    failed(lab.exec_guard("STATUS", stdin_of(missing)), "STATUS with the delegate missing")


@pytest.mark.parametrize("version", VERSIONS)
def test_error_codes(lab: Lab, version: str) -> None:
    conf = lab.conflist(version, [lab.guard(lab.fake())])
    good = stdin_of(conf)
    ns = lab.outer.path

    cni_error(lab.exec_guard("ADD", dict(good, cniVersion="9.9.9"), "c1", ns, "eth0"), 1)
    body = cni_error(lab.exec_guard("ADD", good, "", ns, ""), 4)
    text = body["msg"] + body.get("details", "")
    assert "CNI_CONTAINERID" in text and "CNI_IFNAME" in text, "not every missing var named"
    cni_error(lab.exec_guard("ADD", good, "../../etc", ns, "eth0"), 4)
    cni_error(lab.exec_guard("ADD", good, "c1", ns, "a/b"), 4)
    cni_error(lab.exec_guard("ADD", b"{not json", "c1", ns, "eth0"), {6, 7})
    cni_error(lab.exec_guard("ADD", b"\xff" * 64, "c1", ns, "eth0"), {6, 7})
    no_delegate = {k: v for k, v in good.items() if k != "delegate"}
    cni_error(lab.exec_guard("ADD", no_delegate, "c1", ns, "eth0"), 7)
    padded = json.dumps(dict(good, pad="x" * (8 << 20))).encode()  # valid, but 8 MiB
    cni_error(lab.exec_guard("ADD", padded, "c1", ns, "eth0"), {5, 6})
    assert lab.fake_calls() == [], "the delegate was called for bad input"
    assert lab.state_files() == []
