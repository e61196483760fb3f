"""tools/release/sbom.py: every installed package of the base's dpkg status and every
distribution whose metadata the bundle carries is one component, with its purl; nothing else;
the same inputs give the same bytes. (tests/test_release.py compares a real release's SBOM with
its build root's dpkg status and its bundle.)"""

from __future__ import annotations

import json

import pytest

from tools.release import oci, sbom

RELEASE = oci.Release("1.2.3", "b" * 40, "https://example.invalid/cni-delguard", 1_700_000_000)
STATUS = """\
Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9+deb12u14
Description: GNU C Library
 continued line: Version: not this

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: python3.11
Status: install ok installed
Architecture: amd64
Version: 3.11.2-6+deb12u9
"""


@pytest.fixture
def bundle(tmp_path):
    for name, version in (("pydantic", "2.11.7"), ("typing_extensions", "4.14.1")):
        d = tmp_path / "_internal" / f"{name}-{version}.dist-info"
        d.mkdir(parents=True)
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return tmp_path


@pytest.mark.parametrize(("status", "installed"), [
    pytest.param(STATUS, [("libc6", "2.36-9+deb12u14", "amd64"),
                          ("python3.11", "3.11.2-6+deb12u9", "amd64")], id="installed-only"),
    pytest.param("", [], id="empty"),
])
def test_dpkg_installed(status, installed):
    assert sbom.dpkg_installed(status) == installed


def test_the_sbom_lists_the_base_and_the_bundle_and_nothing_else(bundle):
    doc = json.loads(sbom.sbom("amd64", STATUS, bundle, RELEASE))
    assert doc["bomFormat"] == "CycloneDX" and doc["specVersion"] == "1.5"
    assert doc["metadata"]["component"]["version"] == "1.2.3"
    assert doc["metadata"]["timestamp"] == "2023-11-14T22:13:20Z"
    assert [c["purl"] for c in doc["components"]] == [
        "pkg:deb/debian/libc6@2.36-9%2Bdeb12u14?arch=amd64&distro=debian-12",
        "pkg:deb/debian/python3.11@3.11.2-6%2Bdeb12u9?arch=amd64&distro=debian-12",
        "pkg:pypi/pydantic@2.11.7",
        "pkg:pypi/typing-extensions@4.14.1",
    ]


def test_the_same_inputs_give_the_same_bytes_and_serial(bundle):
    first = sbom.sbom("amd64", STATUS, bundle, RELEASE)
    assert first == sbom.sbom("amd64", STATUS, bundle, RELEASE)
    other = sbom.sbom("amd64", STATUS.replace("14\n", "15\n", 1), bundle, RELEASE)
    assert json.loads(other)["serialNumber"] != json.loads(first)["serialNumber"]
