"""VERSION: the spec versions this plugin speaks. Reads no stdin and no config."""

from __future__ import annotations

from cni_delguard import CURRENT_VERSION, SUPPORTED_VERSIONS
from cni_delguard.cni import jsonlite


def run() -> bytes:
    return jsonlite.dumps(
        {"cniVersion": CURRENT_VERSION, "supportedVersions": list(SUPPORTED_VERSIONS)}
    ).encode()
