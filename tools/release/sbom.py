"""The SBOM of one arch's image (CycloneDX 1.5 JSON), deterministic: no random serial number
(one derived from the contents), the release's time, components sorted by purl.

What the image holds comes from two places, and the SBOM lists both:
- the Debian packages of the base: every package the build root's dpkg status says is installed
  (the bundle carries that root's loader, glibc, libpython and the Python standard library, and
  was made by its binutils and gcc); `pkg:deb/debian/NAME@VERSION?arch=ARCH&distro=debian-12`;
- the Python distributions frozen into the bundle: the `*.dist-info` dirs PyInstaller copied in
  (packaging/cni-delguard.spec copies every distribution's metadata); `pkg:pypi/NAME@VERSION`.
The project itself is the SBOM's main component (metadata.component).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from email.parser import HeaderParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tools.release.oci import Release

DISTRO = "debian-12"  # the build root's release (tools/build.sh: bookworm)
SOURCE = "cni-delguard:source"  # a component's property: where in the image it comes from


def dpkg_installed(status: str) -> list[tuple[str, str, str]]:
    """(package, version, arch) of every stanza of a dpkg status file that is installed."""
    found = []
    for stanza in status.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            m = re.match(r"([A-Za-z0-9-]+): ?(.*)", line)
            if m:
                fields[m.group(1)] = m.group(2)
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            found.append((fields["Package"], fields["Version"], fields["Architecture"]))
    return sorted(found)


def bundle_distributions(bundle: Path) -> list[tuple[str, str]]:
    """(name, version) of every distribution whose metadata the bundle carries."""
    found = set()
    for meta in bundle.rglob("*.dist-info/METADATA"):
        headers = HeaderParser().parsestr(meta.read_text(encoding="utf-8", errors="replace"))
        found.add((headers["Name"], headers["Version"]))
    return sorted(found)


def _deb(name: str, version: str, arch: str) -> dict[str, Any]:
    purl = f"pkg:deb/debian/{name}@{quote(version, safe='')}?arch={arch}&distro={DISTRO}"
    return {"type": "library", "name": name, "version": version, "purl": purl, "bom-ref": purl,
            "properties": [{"name": SOURCE, "value": "debian-base"}]}


def _pypi(name: str, version: str) -> dict[str, Any]:
    normalized = re.sub(r"[-_.]+", "-", name).lower()
    purl = f"pkg:pypi/{normalized}@{version}"
    return {"type": "library", "name": name, "version": version, "purl": purl, "bom-ref": purl,
            "properties": [{"name": SOURCE, "value": "python-bundle"}]}


def components(status: str, bundle: Path) -> Iterator[dict[str, Any]]:
    for name, version, arch in dpkg_installed(status):
        yield _deb(name, version, arch)
    for name, version in bundle_distributions(bundle):
        yield _pypi(name, version)


def sbom(arch: str, status: str, bundle: Path, release: Release) -> bytes:
    parts = sorted(components(status, bundle), key=lambda c: c["purl"])
    main = {"type": "application", "name": "cni-delguard", "version": release.version,
            "bom-ref": f"pkg:oci/cni-delguard@{release.version}?arch={arch}",
            "properties": [{"name": "cni-delguard:revision", "value": release.revision}]}
    body: dict[str, Any] = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {"timestamp": release.created, "component": main,
                     "tools": {"components": [{"type": "application",
                                               "name": "tools/release.sh"}]}},
        "components": parts,
    }
    serial = uuid.uuid5(uuid.NAMESPACE_URL, json.dumps(body, sort_keys=True))
    body = {"serialNumber": f"urn:uuid:{serial}", **body}
    return (json.dumps(body, indent=2, sort_keys=True) + "\n").encode()
