"""The marker store and the file primitives under it: atomic, owner-only, no symlinks followed."""

from __future__ import annotations

import json
import os
import stat

import pytest

from cni_delguard.cni import errors
from cni_delguard.state import fsutil, marker, store


def test_keys_are_readable_and_long_ones_are_hashed():
    assert store.attachment_key("abc", "eth0") == "abc:eth0"
    long_key = store.attachment_key("c" * 300, "eth0")
    assert long_key.startswith("sha256-")
    assert len(long_key) == len("sha256-") + 64
    assert long_key == store.attachment_key("c" * 300, "eth0")
    assert long_key != store.attachment_key("c" * 300, "eth1")


def test_write_read_remove_with_owner_only_modes(tmp_path):
    with store.MarkerStore(str(tmp_path / "s"), "net", create=True) as markers:
        markers.write("c:eth0", marker.ATTEMPTED, "c", "eth0")
        assert markers.body("c:eth0")["state"] == marker.ATTEMPTED
        markers.write("c:eth0", marker.COMPLETED, "c", "eth0")
        assert markers.body("c:eth0")["state"] == marker.COMPLETED
        path = tmp_path / "s/networks/net/c:eth0.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        for d in ("s", "s/networks", "s/networks/net"):
            assert stat.S_IMODE((tmp_path / d).stat().st_mode) == 0o700
        body = json.loads(path.read_text())
        assert body["containerID"] == "c" and body["ifname"] == "eth0"
        markers.remove("c:eth0")
        assert markers.body("c:eth0") == {}
        assert os.listdir(markers.fd) == []


def test_remove_also_clears_temp_files_a_killed_writer_left(tmp_path):
    with store.MarkerStore(str(tmp_path), "net", create=True) as markers:
        leftover = tmp_path / "networks/net/.c:eth0.json.4242.tmp"
        leftover.write_text("{")
        other = tmp_path / "networks/net/.d:eth0.json.4242.tmp"
        other.write_text("{")
        markers.remove("c:eth0")
        assert not leftover.exists()
        assert other.exists()


@pytest.mark.parametrize(
    ("content", "state"),
    [
        (b"", marker.CORRUPT),
        (b"{", marker.CORRUPT),
        (b"[]", marker.CORRUPT),
        (b'{"state": "weird"}', marker.CORRUPT),
        (b'{"state": "attempted"}', marker.ATTEMPTED),
        (None, None),
    ],
    ids=["empty", "torn", "not-object", "unknown-state", "attempted", "missing"],
)
def test_marker_parsing(content, state):
    assert store.parse_marker(content) == state


def test_a_symlinked_marker_is_not_followed(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text('{"state": "completed"}')
    with store.MarkerStore(str(tmp_path / "s"), "net", create=True) as markers:
        os.symlink(secret, tmp_path / "s/networks/net/c:eth0.json")
        assert markers.body("c:eth0") == {}
        markers.write("c:eth0", marker.ATTEMPTED, "c", "eth0")  # replaces the link itself
    assert secret.read_text() == '{"state": "completed"}'
    assert not os.path.islink(tmp_path / "s/networks/net/c:eth0.json")


def test_a_symlinked_state_dir_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    os.symlink(real, tmp_path / "link")
    with pytest.raises(errors.CniError) as exc:
        store.MarkerStore(str(tmp_path / "link"), "net", create=True)
    assert exc.value.code == errors.IO_FAILURE
    assert os.listdir(real) == []


def test_a_symlinked_network_dir_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "s/networks").mkdir(parents=True, mode=0o700)
    os.chmod(tmp_path / "s", 0o700)
    os.symlink(elsewhere, tmp_path / "s/networks/net")
    with pytest.raises(errors.CniError):
        store.MarkerStore(str(tmp_path / "s"), "net", create=True)


def test_a_state_dir_writable_by_others_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # noqa: S103 - the unsafe dir under test
    with pytest.raises(errors.CniError) as exc:
        store.MarkerStore(str(shared), "net", create=True)
    assert "writable by group or others" in exc.value.msg


def test_write_atomic_leaves_no_temp_file_when_the_rename_fails(tmp_path):
    fd = fsutil.open_dir(str(tmp_path), create=True)
    try:
        (tmp_path / "target").mkdir()  # renaming a file over a directory fails
        with pytest.raises(IsADirectoryError):
            fsutil.write_atomic(fd, "target", b"x")
        assert sorted(os.listdir(tmp_path)) == ["target"]
    finally:
        os.close(fd)


def test_prune_oldest_keeps_the_newest(tmp_path):
    d = tmp_path / "v"
    d.mkdir(mode=0o700)
    for i in range(5):
        (d / f"{i}.json").write_text("{}")
        os.utime(d / f"{i}.json", ns=(i * 10**9, i * 10**9))
    fsutil.prune_oldest(str(d), keep=2)
    assert sorted(os.listdir(d)) == ["3.json", "4.json"]


# -- numbers read from the guard's files -----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(1764150000.125, 1764150000.125, id="a-time"),
        pytest.param(0, 0.0, id="the-epoch"),
        pytest.param(store.MAX_EPOCH, float(store.MAX_EPOCH), id="year-9999"),
        pytest.param(store.MAX_EPOCH + 1, None, id="year-10000"),
        pytest.param(-1, None, id="before-1970"),
        pytest.param(10**400, None, id="400-digits"),
        pytest.param(-(10**400), None, id="minus-400-digits"),
        pytest.param(float("nan"), None, id="nan"),
        pytest.param(float("inf"), None, id="infinity"),
        pytest.param(float("-inf"), None, id="minus-infinity"),
        pytest.param(True, None, id="bool"),
        pytest.param("1764150000", None, id="string"),
        pytest.param(None, None, id="none"),
    ],
)
def test_epoch_takes_only_a_time_the_tools_can_show(value, expected):
    assert store.epoch(value) == expected


# -- the one rule for which network dirs are read --------------------------------------------------


def _state_with_odd_networks(tmp_path):
    state = tmp_path / "state"
    with store.MarkerStore(str(state), "good", create=True) as markers:
        markers.write("c1:eth0", marker.COMPLETED, "c1", "eth0")
    nets = state / "networks"
    (tmp_path / "elsewhere").mkdir()
    (nets / "link").symlink_to(tmp_path / "elsewhere")
    (nets / "open").mkdir(mode=0o700)
    (nets / "open").chmod(0o777)
    (nets / "file").write_text("")
    (nets / ".hidden").mkdir(mode=0o700)
    return state


def test_network_dirs_reads_only_the_guards_own_and_says_why_not(tmp_path):
    state = _state_with_odd_networks(tmp_path)
    seen = {d.name: (d.fd is not None, d.skipped) for d in store.network_dirs(str(state))}
    assert seen == {
        ".hidden": (False, "not a network name the guard writes"),
        "file": (False, "a symlink or not a directory"),
        "good": (True, None),
        "link": (False, "a symlink or not a directory"),
        "open": (False, "writable by group or others (mode 777)"),
    }


def test_network_dirs_of_a_missing_state_dir_or_networks(tmp_path):
    with pytest.raises(FileNotFoundError):
        list(store.network_dirs(str(tmp_path / "none")))
    (tmp_path / "empty").mkdir(mode=0o700)
    assert list(store.network_dirs(str(tmp_path / "empty"))) == []


def test_network_dirs_refuses_an_unusable_networks_dir(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (tmp_path / "elsewhere").mkdir()
    (state / "networks").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(fsutil.UnsafeDirError, match="a symlink or not a directory"):
        list(store.network_dirs(str(state)))


# -- release records: only root's own counts -------------------------------------------------------


def _record(markers, tmp_path, how):
    net = tmp_path / "s/networks/net"
    path = net / "c:eth0.release"
    if how == "good":
        markers.put_release("c:eth0", {"reason": "gone", "uid": 4242, "time": 1e999})
    elif how == "group-writable":
        markers.put_release("c:eth0", {"reason": "r"})
        path.chmod(0o660)
    elif how == "hard-link":
        markers.put_release("c:eth0", {"reason": "r"})
        os.link(path, tmp_path / "twin")
    elif how == "fifo":
        os.mkfifo(path, 0o600)
    elif how == "other-owner":
        markers.put_release("c:eth0", {"reason": "r"})
        os.chown(path, 65534, 65534)


@pytest.mark.parametrize(
    ("how", "refused"),
    [
        pytest.param("good", None, id="roots-own"),
        pytest.param("group-writable", "writable by group or others (mode 660)", id="mode"),
        pytest.param("hard-link", "2 hard links", id="hard-link"),
        pytest.param("fifo", "not a regular file", id="fifo"),
        pytest.param(
            "other-owner",
            f"owned by uid 65534, not {os.geteuid()}",
            marks=pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root"),
            id="other-owner",
        ),
    ],
)
def test_a_release_record_counts_only_when_it_is_roots_own(tmp_path, how, refused):
    with store.MarkerStore(str(tmp_path / "s"), "net", create=True) as markers:
        _record(markers, tmp_path, how)
        found = markers.release("c:eth0")
    assert found is not None
    assert found.refused == (None if refused is None else f"c:eth0.release: {refused}")
    if refused is None:
        # What the log says: the owner fstat gives, never the uid the file claims; no time
        # that is not a time (1e999 is infinity: not JSON).
        assert found.logged() == {"reason": "gone", "uid": os.geteuid()}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param({"reason": "r" * 600, "time": 5}, {"reason": "r" * 500, "time": 5.0},
                     id="long-reason"),
        pytest.param({"reason": 12, "time": "now"}, {"reason": "no reason recorded"},
                     id="not-text"),
        pytest.param({}, {"reason": "no reason recorded"}, id="empty"),
    ],
)
def test_what_the_log_says_of_a_release_record(fields, expected):
    assert store.Release(fields, 0, None).logged() == expected | {"uid": 0}


def test_walk_makes_only_the_leaf_unless_asked_for_parents(tmp_path):
    with pytest.raises(FileNotFoundError):
        fsutil.walk(str(tmp_path / "a" / "b"), create=True)
    assert not (tmp_path / "a").exists()
    os.close(fsutil.walk(str(tmp_path / "leaf"), create=True))
    assert stat.S_IMODE((tmp_path / "leaf").stat().st_mode) == fsutil.DIR_MODE
    os.close(fsutil.walk(str(tmp_path / "a" / "b"), create=True, make_parents=True))
    assert (tmp_path / "a" / "b").is_dir()


def test_walk_names_the_component_it_refuses(tmp_path):
    deep = tmp_path / "x" / "y"
    deep.mkdir(parents=True)
    os.symlink(deep, tmp_path / "x" / "link")
    with pytest.raises(fsutil.UnsafeDirError) as exc:
        fsutil.walk(str(tmp_path / "x" / "link" / "z" / "w"))
    assert exc.value.why == f"{tmp_path}/x/link is a symlink or not a directory"
    with pytest.raises(fsutil.UnsafeDirError) as exc:
        fsutil.walk(str(tmp_path / "x" / "link"))
    assert exc.value.why == "a symlink or not a directory"


def test_walk_refuses_a_path_past_its_depth_bound_before_opening_it():
    with pytest.raises(fsutil.UnsafeDirError) as exc:
        fsutil.walk("/nonexistent" + "/d" * fsutil.MAX_WALK_DEPTH)
    assert "deeper than" in exc.value.why
