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
        ("state", "/tmp/x/state", False),  # issue 38: any local user makes names there
        ("state", "/var/tmp/x/state", False),
        ("log", "/tmp/x.log", False),
    ],
)
def test_built_in_places(kind: str, path: str, allowed: bool) -> None:
    assert (paths.refusal(kind, path, "") is None) == allowed


def test_settings_file_lines() -> None:
    text = b"# comment\nstate /data/dg/  # trailing\nlog /data/logs\nlog /\nbogus /x\nstate rel\n"
    assert paths.parse(text) == {"state": ["/data/dg/"], "log": ["/data/logs/"]}
