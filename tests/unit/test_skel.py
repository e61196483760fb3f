"""CNI_* environment validation and bounded stdin."""

from __future__ import annotations

import io

import pytest

from cni_delguard.cni import errors, skel

FULL = {
    "CNI_COMMAND": "ADD",
    "CNI_CONTAINERID": "abc123",
    "CNI_NETNS": "/var/run/netns/x",
    "CNI_IFNAME": "eth0",
    "CNI_PATH": "/opt/cni/bin",
}


@pytest.mark.parametrize(
    ("command", "missing"),
    [
        pytest.param("ADD", ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"], id="add"),
        pytest.param(
            "CHECK", ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"], id="check"
        ),
        pytest.param("DEL", ["CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"], id="del-no-netns"),
        pytest.param("GC", ["CNI_PATH"], id="gc"),
        pytest.param("STATUS", ["CNI_PATH"], id="status"),
    ],
)
def test_every_missing_variable_is_named_in_one_error(command, missing):
    with pytest.raises(errors.CniError) as exc:
        skel.parse_env({"CNI_COMMAND": command})
    assert exc.value.code == errors.INVALID_ENV
    for name in missing:
        assert name in exc.value.msg
    assert "CNI_NETNS" not in exc.value.msg or "CNI_NETNS" in missing


def test_version_needs_nothing():
    assert skel.parse_env({"CNI_COMMAND": "VERSION"}).command == "VERSION"


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        pytest.param({}, "CNI_COMMAND", id="no-command"),
        pytest.param({"CNI_COMMAND": "FROB"}, "FROB", id="unknown-command"),
    ],
)
def test_command_errors(env, fragment):
    with pytest.raises(errors.CniError) as exc:
        skel.parse_env(env)
    assert exc.value.code == errors.INVALID_ENV
    assert fragment in exc.value.msg


@pytest.mark.parametrize(
    "cid",
    ["../etc", "a/b", ".hidden", "-x", "", "a b", "a:b", "a\x00b", "é"],
    ids=[
        "traversal",
        "slash",
        "dot-first",
        "dash-first",
        "empty",
        "space",
        "colon",
        "nul",
        "unicode",
    ],
)
def test_bad_container_ids(cid):
    assert not skel.valid_name(cid)


@pytest.mark.parametrize("cid", ["a", "0", "cnitool-0123456789abcdef0123", "A_b.c-d", "x" * 1000])
def test_good_container_ids(cid):
    assert skel.valid_name(cid)


@pytest.mark.parametrize(
    "ifname",
    ["", ".", "..", "a/b", "a:b", "a b", "a\tb", "x" * 16, "\u00e9" * 8, "a\x7fb"],
    ids=[
        "empty",
        "dot",
        "dotdot",
        "slash",
        "colon",
        "space",
        "tab",
        "16-bytes",
        "16-utf8-bytes",
        "del",
    ],
)
def test_bad_ifnames(ifname):
    assert not skel.valid_ifname(ifname)


@pytest.mark.parametrize("ifname", ["eth0", "net1", "x" * 15, "a.b", "veth@1", "\u00e9" * 7])
def test_good_ifnames(ifname):
    assert skel.valid_ifname(ifname)


def test_invalid_identifiers_are_reported_together():
    env = dict(FULL, CNI_CONTAINERID="../x", CNI_IFNAME="a/b")
    with pytest.raises(errors.CniError) as exc:
        skel.parse_env(env)
    assert exc.value.code == errors.INVALID_ENV
    assert "CNI_CONTAINERID" in exc.value.msg
    assert "CNI_IFNAME" in exc.value.msg


def test_a_valid_environment_is_read():
    inv = skel.parse_env(dict(FULL, CNI_ARGS="K=V"))
    assert (inv.command, inv.container_id, inv.netns, inv.ifname, inv.cni_path, inv.args) == (
        "ADD",
        "abc123",
        "/var/run/netns/x",
        "eth0",
        "/opt/cni/bin",
        "K=V",
    )


def test_stdin_is_bounded():
    assert skel.read_stdin(io.BytesIO(b"x" * 10), limit=10) == b"x" * 10
    with pytest.raises(errors.CniError) as exc:
        skel.read_stdin(io.BytesIO(b"x" * 11), limit=10)
    assert exc.value.code == errors.DECODING_FAILURE
