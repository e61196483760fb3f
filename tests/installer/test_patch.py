"""patch.py: wrap and unwrap as pure functions, and every refusal."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cni_delguard.node.patch import GUARD, PatchError, guard_plugins, unwrap, wrap

MULTUS: dict[str, Any] = {
    "cniVersion": "0.3.1",
    "name": "multus-cni-network",
    "type": "multus",
    "capabilities": {"portMappings": True},
    "delegates": [{"name": "x"}],
}
LIST: dict[str, Any] = {
    "cniVersion": "1.0.0",
    "name": "net",
    "plugins": [
        {"type": "bridge", "bridge": "cni0"},
        {"type": "portmap", "capabilities": {"portMappings": True}},
    ],
}


def test_conf_delegate_is_the_whole_original_and_capabilities_are_copied():
    new = wrap(copy.deepcopy(MULTUS), False, "multus", {})
    assert new == {
        "cniVersion": "0.3.1",
        "name": "multus-cni-network",
        "type": GUARD,
        "capabilities": {"portMappings": True},
        "delegate": MULTUS,
    }


def test_conflist_entry_is_replaced_at_its_position():
    new = wrap(copy.deepcopy(LIST), True, "portmap", {"logLevel": "debug"})
    assert new["plugins"][0] == LIST["plugins"][0]
    assert new["plugins"][1] == {
        "type": GUARD,
        "capabilities": {"portMappings": True},
        "logLevel": "debug",
        "delegate": LIST["plugins"][1],
    }
    assert list(new) == list(LIST)


def test_no_capabilities_on_the_delegate_means_none_on_the_guard():
    new = wrap(copy.deepcopy(LIST), True, "bridge", {})
    assert "capabilities" not in new["plugins"][0]


@pytest.mark.parametrize(
    ("is_list", "conf", "wrap_type"),
    [
        pytest.param(False, MULTUS, "multus", id="conf"),
        pytest.param(True, LIST, "bridge", id="conflist"),
    ],
)
def test_wrap_is_idempotent_and_unwrap_gives_the_original(is_list, conf, wrap_type):
    once = wrap(copy.deepcopy(conf), is_list, wrap_type, {"stateDir": "/s"})
    assert wrap(copy.deepcopy(once), is_list, wrap_type, {"stateDir": "/s"}) == once
    assert unwrap(once, is_list) == conf
    assert len(guard_plugins(once, is_list)) == 1


def test_rewrap_updates_requested_keys_only():
    once = wrap(copy.deepcopy(MULTUS), False, "multus", {"logLevel": "info", "lockTimeout": 5})
    twice = wrap(copy.deepcopy(once), False, "multus", {"logLevel": "debug"})
    assert twice["logLevel"] == "debug"
    assert twice["lockTimeout"] == 5


def test_multus_cni_dir_becomes_the_guards_multus_cache_dir():
    conf = dict(copy.deepcopy(MULTUS), cniDir="/var/lib/cni/multus-b")
    assert wrap(conf, False, "multus", {})["multusCacheDirs"] == ["/var/lib/cni/multus-b"]
    default = dict(copy.deepcopy(MULTUS), cniDir="/var/lib/cni/multus/")
    assert "multusCacheDirs" not in wrap(default, False, "multus", {})


def test_unwrap_of_an_unwrapped_conf_is_none():
    assert unwrap(MULTUS, False) is None
    assert unwrap(LIST, True) is None


def test_unwrap_of_a_hand_written_conf_keeps_name_and_version():
    hand = {"cniVersion": "1.0.0", "name": "n", "type": GUARD, "delegate": {"type": "bridge"}}
    assert unwrap(hand, False) == {"cniVersion": "1.0.0", "name": "n", "type": "bridge"}


@pytest.mark.parametrize(
    ("is_list", "conf", "wrap_type", "why"),
    [
        pytest.param(
            False, MULTUS, "bridge", "plugin type is 'multus', not 'bridge'", id="conf-type"
        ),
        pytest.param(True, LIST, "multus", "no plugin of type 'multus'", id="no-such-plugin"),
        pytest.param(
            True,
            {"name": "n", "plugins": [{"type": "bridge"}, {"type": "bridge"}]},
            "bridge",
            "2 plugins of type 'bridge'",
            id="several-candidates",
        ),
        pytest.param(
            True,
            {
                "name": "n",
                "plugins": [{"type": "bridge"}, {"type": GUARD, "delegate": {"type": "bridge"}}],
            },
            "bridge",
            "2 plugins of type 'bridge'",
            id="wrapped-and-bare",
        ),
        pytest.param(
            True,
            {
                "name": "n",
                "plugins": [{"type": GUARD, "delegate": {"type": "x"}}, {"type": "bridge"}],
            },
            "bridge",
            "already has a cni-delguard entry wrapping 'x'",
            id="wraps-another",
        ),
        pytest.param(
            False,
            {"name": "n", "type": GUARD, "delegate": {"type": "x"}},
            "bridge",
            "already wrapped around 'x'",
            id="conf-wraps-another",
        ),
        pytest.param(True, {"name": "n", "plugins": []}, "bridge", "no 'plugins' list", id="empty"),
        pytest.param(
            True,
            {"name": "n", "plugins": ["bridge"]},
            "bridge",
            "not an object",
            id="plugin-not-object",
        ),
        pytest.param(
            False,
            {"name": "n", "type": GUARD},
            "bridge",
            "no 'delegate' object",
            id="guard-without-delegate",
        ),
    ],
)
def test_refusals(is_list, conf, wrap_type, why):
    with pytest.raises(PatchError, match=why):
        wrap(copy.deepcopy(conf), is_list, wrap_type, {})
