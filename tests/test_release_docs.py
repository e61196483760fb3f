"""What users read around a release stays true to the repository: CHANGELOG.md has the current
version's section and an Unreleased one, docs/support.md names every Kubernetes, runtime and multus
version the suites run (peers/pins.tsv) for the current release, and the version is semver."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cni_delguard import __version__
from tests.support import peers

REPO = Path(__file__).resolve().parents[1]
SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?")


def test_the_version_is_semver():
    assert SEMVER.fullmatch(__version__)


def test_the_changelog_has_unreleased_and_this_version():
    headings = re.findall(r"^## (\S+)", (REPO / "CHANGELOG.md").read_text(), flags=re.M)
    assert headings[0] == "Unreleased"
    assert __version__ in headings


@pytest.mark.parametrize("name", ["kubelet", "control-plane", "containerd", "cri-o", "multus"])
def test_the_support_policy_names_what_the_suites_run(name):
    row = next(line for line in (REPO / "docs/support.md").read_text().splitlines()
               if line.startswith(f"| {__version__} |"))
    for peer in peers.all_peers():
        if peer.name == name:
            assert peer.version.removeprefix("v").lstrip() in row, f"{name} {peer.version}"
