"""node/options.py's `under`: the one join of --root with a path of the node (from a flag or a
conf), normalized before it is joined, so nothing climbs out of the root."""

from __future__ import annotations

import os

import pytest

from cni_delguard.node import options
from cni_delguard.tooling import UsageError


@pytest.mark.parametrize(
    ("root", "path", "expected"),
    [
        pytest.param("/", "/var/lib/cni/delguard", "/var/lib/cni/delguard", id="host"),
        pytest.param("/host", "/var/lib/cni/delguard", "/host/var/lib/cni/delguard", id="plain"),
        pytest.param("/host", "/../var/lib/cni/delguard", "/host/var/lib/cni/delguard",
                     id="dotdot-at-the-top"),
        pytest.param("/host", "/var/../../../etc", "/host/etc", id="dotdot-past-the-top"),
        pytest.param("/host/", "//var//lib/./cni", "/host/var/lib/cni", id="slashes-and-dots"),
        pytest.param("/host", "/", "/host", id="the-root-itself"),
        pytest.param("/host/../node", "/x", "/node/x", id="root-normalized-too"),
    ],
)
def test_under_keeps_the_path_under_the_root(root, path, expected):
    assert options.under(root, path) == expected


def test_a_relative_root_is_taken_from_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert options.under("node", "/../etc") == os.path.join(tmp_path, "node", "etc")


@pytest.mark.parametrize("path", ["var/lib", "", "../x", "/var/\0lib"])
def test_a_path_that_is_not_absolute_is_a_usage_error(path):
    with pytest.raises(UsageError, match="must be an absolute path"):
        options.under("/host", path)


def test_absolute_normalizes_as_the_guard_reads_its_config():
    assert options.absolute("/../var/lib/cni/delguard/") == "/var/lib/cni/delguard"
