"""The release's provenance: an SLSA provenance v1 predicate (https://slsa.dev/provenance/v1)
that `cosign attest --type slsaprovenance1` wraps in an in-toto statement whose subject is the
image's digest. It names the source (the home's repository at the commit), the command that built
it (its flags, never the key or a path of the releaser's machine) and the builder. No time of
the build in it: two builds of one commit write the same bytes (its time is the commit's, in
internalParameters)."""

from __future__ import annotations

import json
from typing import Any

from tools.release.oci import Release

BUILD_TYPE = "https://slsa.dev/provenance/v1?builder=cni-delguard-tools-release-sh"


def predicate(release: Release, command: list[str], builder: str,
              artifacts: dict[str, str]) -> bytes:
    """`artifacts`: name -> sha256 of each file of the release (SHA256SUMS), as byproducts."""
    source = f"git+{release.source}"
    body: dict[str, Any] = {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": {
                "command": command,
                "source": {"uri": source, "digest": {"gitCommit": release.revision}},
                "version": release.version,
            },
            "internalParameters": {"SOURCE_DATE_EPOCH": release.epoch},
            "resolvedDependencies": [
                {"uri": source, "digest": {"gitCommit": release.revision}}],
        },
        "runDetails": {
            "builder": {"id": builder},
            "byproducts": [{"name": name, "digest": {"sha256": sha}}
                           for name, sha in sorted(artifacts.items())],
        },
    }
    return (json.dumps(body, indent=2, sort_keys=True) + "\n").encode()
