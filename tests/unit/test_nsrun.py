"""tests/support/nsrun.py and holder.py's argv for it: the one way a test's namespaces are made
(binds, held or for one command)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import holder, nsrun


@pytest.mark.parametrize(("argv", "parsed"), [
    pytest.param(["/a:/run"], (False, None, [("/a", "/run")], []), id="hold-one-bind"),
    pytest.param(["--net", "--overlays", "/o", "/a:/run", "/b:/var/log"],
                 (True, "/o", [("/a", "/run"), ("/b", "/var/log")], []), id="hold-net-overlays"),
    pytest.param(["/a:/var/lib/cni", "--", "cnitool", "add", "--", "x"],
                 (False, None, [("/a", "/var/lib/cni")], ["cnitool", "add", "--", "x"]),
                 id="exec-keeps-its-own-dashes"),
    pytest.param(["--", "true"], (False, None, [], ["true"]), id="exec-without-binds"),
])
def test_parse(argv: list[str], parsed: tuple[object, ...]) -> None:
    assert nsrun.parse(argv) == parsed


@pytest.mark.parametrize("argv", [
    pytest.param(["/a"], id="a-bind-without-its-target"),
    pytest.param(["/a:/run", "--"], id="dashes-without-a-command"),
    pytest.param(["--overlays"], id="overlays-without-a-dir"),
])
def test_parse_refuses(argv: list[str]) -> None:
    with pytest.raises(SystemExit, match="usage"):
        nsrun.parse(argv)


def test_once_runs_the_command_after_the_binds_in_a_private_mount_namespace() -> None:
    argv = holder.once([(Path("/t/cache"), "/var/lib/cni")], ["cnitool", "del"])
    assert argv[:5] == ["unshare", "--mount", "--propagation", "private", "--"]
    assert "--net" not in argv
    assert argv[argv.index(str(holder.NSRUN)) + 1:] == ["/t/cache:/var/lib/cni", "--", "cnitool",
                                                        "del"]
    assert nsrun.parse(argv[argv.index(str(holder.NSRUN)) + 1:]) == (
        False, None, [("/t/cache", "/var/lib/cni")], ["cnitool", "del"])
