"""Two releases of the guard, as the project makes them: `tools/release.sh` (this machine's arch),
each a clean clone's commit, signed with a key made for the run (tests/support/cosign.py).

- FIRST: the commit under test (HEAD; its version, pyproject.toml's). Its bundle is usually
  tools/build.sh's cached one (tools/test.sh built the same inputs first).
- SECOND: the same commit with the version raised (pyproject.toml, cni_delguard.__version__ and the
  chart's generated Chart.yaml, in a throwaway clone with one more commit), released again: a
  different bundle (another digest, so the installer switches versions as a real upgrade does),
  a chart of that version naming its own image. `helm upgrade` from the first to the second is
  the upgrade scenario.

Built once per run on first use (a minute or two: the second bundle is built for real), then
published to each cluster's registry (publish.py); removed from disk by close().
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from tests.e2e_cluster import publish
from tests.e2e_cluster.site import Release
from tests.support import cosign, peers
from tests.support.guard import HOST_ARCH

REPO = Path(__file__).resolve().parents[2]
BUILD_BOUND = 2400  # seconds for one release, under load, the bundle built afresh
BUMP = "-e2e.2"  # the second version: the first's, a pre-release suffix of its own


class Releases:
    def __init__(self, helm_version: str) -> None:
        self._lock = threading.Lock()
        self._made: tuple[Release, Release] | None = None
        self._work: Path | None = None
        self._helm_version = helm_version

    def get(self) -> tuple[Release, Release]:
        with self._lock:
            if self._made is None:
                self._made = self._build()
            return self._made

    def _build(self) -> tuple[Release, Release]:
        import pytest

        exe = cosign.binary()
        missing = [] if exe else ["cosign (tools/unpack-deb.sh cosign/trixie usr/bin/cosign)"]
        missing += [t for t in ("skopeo",) if shutil.which(t) is None]
        if missing or exe is None:
            why = f"a release needs {', '.join(missing)} (tools/test.sh installs them)"
            if os.environ.get("CI"):
                pytest.fail(why)
            pytest.skip(why)
        self._work = Path(tempfile.mkdtemp(prefix="dgcl-releases-"))
        signer = cosign.with_key_pair(exe, self._work / "cosign")
        first_tree = self._clone("first")
        first_version = _version(first_tree)
        first = self._release(first_tree, first_version, signer)
        second_tree = self._clone("second")
        second_version = first_version + BUMP
        for name, pattern in (("pyproject.toml", '^version = "{}"'),
                              ("cni_delguard/__init__.py", '^__version__ = "{}"')):
            path = second_tree / name
            text = path.read_text(encoding="utf-8")
            old = pattern.format(re.escape(first_version))
            new = pattern.format(second_version).replace("^", "", 1)
            path.write_text(re.sub(old, new, text, count=1, flags=re.M), encoding="utf-8")
        subprocess.run(["python3", "tools/generate-chart.py"], cwd=second_tree, check=True,
                       capture_output=True, timeout=120, env=dict(os.environ,
                                                                  PYTHONPATH=str(second_tree)))
        subprocess.run(["git", "-C", str(second_tree), "-c", "user.name=e2e", "-c",
                        "user.email=e2e@localhost", "commit", "--quiet", "-am",
                        f"e2e: version {second_version}"], check=True, capture_output=True,
                       timeout=60)
        second = self._release(second_tree, second_version, signer)
        return first, second

    def _clone(self, name: str) -> Path:
        assert self._work is not None
        tree = self._work / name
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True, timeout=60).stdout.strip()
        subprocess.run(["git", "clone", "--quiet", "--shared", str(REPO), str(tree)],
                       check=True, capture_output=True, timeout=300)
        subprocess.run(["git", "-C", str(tree), "checkout", "--quiet", head], check=True,
                       capture_output=True, timeout=60)
        return tree

    def _release(self, tree: Path, version: str, signer: cosign.Cosign) -> Release:
        assert self._work is not None
        out = self._work / f"release-{version}"
        helm = peers.find("helm", self._helm_version).bin("helm")
        built = subprocess.run(
            [str(tree / "tools/release.sh"), "--home-url", publish.HOME_URL, "--home-image",
             publish.IMAGE, "--arch", HOST_ARCH, "--out", str(out)],
            env=signer.env() | {"HELM": str(helm)}, capture_output=True, text=True,
            timeout=BUILD_BOUND, check=False, cwd=tree)
        assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-4000:]
        return Release(version, out, signer)

    def close(self) -> None:
        with self._lock:
            if self._work is not None:
                shutil.rmtree(self._work)
            self._made, self._work = None, None


def _version(tree: Path) -> str:
    text = (tree / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^version = "([^"]+)"', text, re.M)
    assert match is not None
    return match.group(1)
