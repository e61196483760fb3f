"""Debian trixie's cosign (2.5.0), unpacked under .cache/ by tools/unpack-deb.sh (tools/test.sh
runs it; COSIGN overrides), as a releaser and a user run it: a key pair made for the test in its
temp dir (never a key of anyone's), signatures without a transparency log (nothing here reaches
the network), verified with --insecure-ignore-tlog as docs/building.md tells users."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The password of the key made for each test (COSIGN_PASSWORD, as cosign reads it): not a secret.
PASSWORD = "release-test"  # noqa: S105


def binary() -> Path | None:
    found = Path(os.environ.get("COSIGN") or REPO / ".cache/cosign/usr/bin/cosign")
    return found if os.access(found, os.X_OK) else None


@dataclass(frozen=True)
class Cosign:
    exe: Path
    home: Path  # HOME of every run: cosign's own dirs (~/.sigstore) stay in the test's temp dir

    @property
    def key(self) -> Path:
        return self.home / "cosign.key"

    @property
    def pub(self) -> Path:
        return self.home / "cosign.pub"

    def env(self) -> dict[str, str]:
        return {**os.environ, "HOME": str(self.home), "COSIGN_PASSWORD": PASSWORD,
                "COSIGN_KEY": str(self.key), "COSIGN": str(self.exe)}

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.exe), *args], capture_output=True, text=True,
                              timeout=timeout, env=self.env(), cwd=self.home, check=False)


def with_key_pair(exe: Path, home: Path) -> Cosign:
    """A cosign whose key pair (cosign.key, cosign.pub) is made in `home`."""
    home.mkdir(parents=True, exist_ok=True)
    c = Cosign(exe, home)
    r = c.run("generate-key-pair")
    assert r.returncode == 0, r.stderr
    return c
