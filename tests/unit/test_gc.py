"""GC of the guard's own markers."""

from __future__ import annotations

import os

import pytest

from cni_delguard.cni import errors
from cni_delguard.guard import prune as gc
from cni_delguard.state import marker, store
from cni_delguard.state.locking import AttachmentLock
from tests.unit.conftest import make_settings


def _populate(state_dir, keys):
    with store.MarkerStore(str(state_dir), "net1", create=True) as markers:
        for cid in keys:
            markers.write(f"{cid}:eth0", marker.COMPLETED, cid, "eth0")
    net = state_dir / "networks/net1"
    (net / "lockonly:eth0.lock").write_text("")
    (net / ".tmponly:eth0.json.77.tmp").write_text("")
    return net


def test_prunes_everything_not_valid(tmp_path):
    net = _populate(tmp_path, ["keep", "drop"])
    pruned, _ = gc.prune(make_settings(tmp_path), [{"containerID": "keep", "ifname": "eth0"}])
    assert pruned == ["drop:eth0", "lockonly:eth0", "tmponly:eth0"]
    assert sorted(p.name for p in net.iterdir()) == ["keep:eth0.json"]


def test_a_busy_attachment_is_left_for_the_next_gc(tmp_path):
    net = _populate(tmp_path, ["busy"])
    lock = AttachmentLock(str(net / "busy:eth0.lock"), timeout=1)
    try:
        pruned, _ = gc.prune(make_settings(tmp_path), [])
    finally:
        lock.release()
    assert "busy:eth0" not in pruned
    assert (net / "busy:eth0.json").exists()


def test_nothing_to_prune_without_a_network_dir(tmp_path):
    assert gc.prune(make_settings(tmp_path), []) == ([], None)


@pytest.mark.parametrize(
    "valid", [{}, [1], [{"containerID": "a"}], [{"containerID": 1, "ifname": "e"}]]
)
def test_malformed_valid_attachments_are_code_7(valid):
    with pytest.raises(errors.CniError) as exc:
        gc.valid_keys(valid)
    assert exc.value.code == errors.INVALID_CONFIG


@pytest.mark.parametrize("odd", ["mis-moded", "symlink"])
def test_a_network_dir_that_is_not_the_guards_is_skipped_not_read(tmp_path, odd):
    net = _populate(tmp_path, ["drop"])
    if odd == "mis-moded":
        net.chmod(0o777)
    else:
        net.rename(tmp_path / "moved")
        net.symlink_to(tmp_path / "moved")
    pruned, skipped = gc.prune(make_settings(tmp_path), [])
    assert pruned == []
    assert skipped is not None and skipped.startswith(f"state dir {net} is unusable: ")
    assert "drop:eth0.json" in os.listdir(net)
