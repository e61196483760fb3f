"""The path rule for stateDir and logFile (cni_delguard/guard/paths.py)."""

from __future__ import annotations

import pytest

from cni_delguard.guard import paths


@pytest.mark.parametrize(
    ("kind", "path", "allowed"),
    [
        ("log", "/var/log/cni-delguard/delguard.log", True),
        ("log", "/var/log", False),  # the prefix itself is not under it
        ("log", "/etc/profile.d/zz.sh", False),
        ("log", "/root/.bash_profile", False),
        ("log", "/var/lib/cni/delguard/x.log", False),  # state places are not log places
        ("log", "/var/logger/x", False),
        ("state", "/var/lib/cni/delguard", True),
        ("state", "/run/cni-delguard", True),
        ("state", "/etc/cron.d", False),
        ("state", "/tmp/x/state", False),  # any local user makes names there
        ("state", "/var/tmp/x/state", False),
        ("log", "/tmp/x.log", False),
    ],
)
def test_built_in_places(kind: str, path: str, allowed: bool) -> None:
    assert (paths.refusal(kind, path, "") is None) == allowed


def test_settings_file_lines() -> None:
    text = b"# comment\nstate /data/dg/  # trailing\nlog /data/logs\nlog /\nbogus /x\nstate rel\n"
    assert paths.parse(text) == {"state": ["/data/dg/"], "log": ["/data/logs/"]}


@pytest.mark.parametrize(
    ("kind", "path", "why"),
    [
        pytest.param("state", "/var/lib/" + "x/" * 40 + "s", "components", id="deep-state"),
        pytest.param("log", "/var/log/" + "x/" * 40 + "l", "components", id="deep-log"),
        pytest.param("state", "/var/lib/" + "x" * 1100, "bytes", id="long-state"),
        pytest.param("log", "/var/log/" + "é" * 600, "bytes", id="long-in-bytes"),
    ],
)
def test_a_path_past_the_bounds_is_refused_before_the_prefix_is_asked(
    kind: str, path: str, why: str
) -> None:
    refused = paths.refusal(kind, path, "")
    assert refused is not None and why in refused


def test_the_bounds_leave_room_for_the_built_in_and_ordinary_paths() -> None:
    assert paths.refusal("state", "/var/lib/" + "x/" * 28 + "s", "") is None
    assert paths.refusal("log", "/var/log/" + "x" * 900, "") is None


@pytest.mark.parametrize(
    ("kind", "path", "widened", "made"),
    [
        pytest.param("state", "/var/lib/cni/delguard", "", True, id="built-in-state"),
        pytest.param("log", "/var/log/cni-delguard", "", True, id="built-in-log"),
        pytest.param("state", "/run/nologin", "", False, id="run-nologin"),
        pytest.param("log", "/var/log/journal", "", False, id="var-log-journal"),
        pytest.param("state", "/var/lib/cni/other", "", False, id="beside-the-built-in"),
        pytest.param("state", "/data/dg/state", "state /data/dg\n", True, id="leaf-of-admins"),
        pytest.param("state", "/data/dg/a/state", "state /data/dg\n", True, id="deeper-leaf"),
        pytest.param("state", "/data/dg", "state /data/dg\n", False, id="the-admins-dir-itself"),
        pytest.param("log", "/data/dg/logs", "state /data/dg\n", False, id="other-kind"),
    ],
)
def test_what_the_guard_may_create(tmp_path, kind, path, widened, made) -> None:
    """Only its own default dirs, and a leaf under a place the admin named (whose parent must
    exist: the walk makes the leaf only). On 58a9769 every missing dir under the prefixes was
    made: /run/nologin (logins refused), /var/log/journal (journald persistent)."""
    (tmp_path / paths.SETTINGS_FILE).write_text(widened)
    builtin = {"state": "/var/lib/cni/delguard", "log": "/var/log/cni-delguard"}[kind]
    assert paths.creatable(kind, path, str(tmp_path), builtin) is made
