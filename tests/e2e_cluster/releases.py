"""Two releases of the guard, as users get them: the chart packaged with `helm package` and the
image tools/build-image.sh builds, each version its own build.

- FIRST: the commit under test, as it is (its version, pyproject.toml's).
- SECOND: the same commit with the version raised (cni_delguard.__version__, in a throwaway clone
  with one more commit), built again: a different bundle (another digest, so the installer
  switches versions as a real upgrade does), a chart of that version whose appVersion names its
  image. `helm upgrade` from the first to the second is the upgrade scenario.

Built once per run on first use (minutes: the first build also makes the debootstrap base), then
saved as archives every node imports; removed from podman's store and disk by close().
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from tests.e2e_cluster.site import Release
from tests.e2e_kubelet.installer_pod import TOOLS
from tests.support import peers
from tests.support.guard import HOST_ARCH
from tests.support.helm import CHART, Helm

REPO = Path(__file__).resolve().parents[2]
BUILD_BOUND = 2400  # seconds for one image build, under load, the base image included
TAG = "localhost/cni-delguard:dgcl"  # build-image.sh names the arch's image <tag>-<arch>
BUMP = "-e2e.2"  # the second version: the first's, a pre-release suffix of its own


class Releases:
    def __init__(self, helm_version: str) -> None:
        self._lock = threading.Lock()
        self._made: tuple[Release, Release] | None = None
        self._work: Path | None = None
        self._helm_version = helm_version
        self._tags: list[str] = []

    def get(self) -> tuple[Release, Release]:
        with self._lock:
            if self._made is None:
                self._made = self._build()
            return self._made

    def _build(self) -> tuple[Release, Release]:
        import pytest

        missing = [t for t in TOOLS if shutil.which(t) is None]
        if missing:
            why = f"the installer image needs {', '.join(missing)} (tools/test.sh installs them)"
            if os.environ.get("CI"):
                pytest.fail(why)
            pytest.skip(why)
        self._work = Path(tempfile.mkdtemp(prefix="dgcl-releases-"))
        first_version = _version(REPO)
        first = self._release(REPO, first_version, TAG)
        clone = self._work / "second"
        subprocess.run(["git", "clone", "--quiet", "--shared", str(REPO), str(clone)],
                       check=True, capture_output=True, timeout=300)
        subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", _head()], check=True,
                       capture_output=True, timeout=60)
        second_version = first_version + BUMP
        init = clone / "cni_delguard" / "__init__.py"
        init.write_text(init.read_text(encoding="utf-8").replace(
            f'__version__ = "{first_version}"', f'__version__ = "{second_version}"'),
            encoding="utf-8")
        subprocess.run(["git", "-C", str(clone), "-c", "user.name=e2e", "-c",
                        "user.email=e2e@localhost", "commit", "--quiet", "-am",
                        f"e2e: version {second_version}"], check=True, capture_output=True,
                       timeout=60)
        second = self._release(clone, second_version, TAG + "2")
        return first, second

    def _release(self, tree: Path, version: str, tag: str) -> Release:
        assert self._work is not None
        built = subprocess.run(["bash", str(tree / "tools" / "build-image.sh"), HOST_ARCH],
                               env=dict(os.environ, IMAGE=tag), capture_output=True,
                               text=True, timeout=BUILD_BOUND, check=False, cwd=tree)
        assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-4000:]
        self._tags.append(tag)
        name = f"{tag}-{HOST_ARCH}"
        archive = self._work / f"installer-{version}.tar"
        subprocess.run(["podman", "save", "--format", "docker-archive", "-o", str(archive),
                        name], check=True, capture_output=True, timeout=600)
        helm = Helm(peers.find("helm", self._helm_version), self._work / "helm-home")
        out = self._work / f"chart-{version}"
        packed = helm.run("package", str(CHART), "--version", version, "--app-version",
                          version, "--destination", str(out))
        assert packed.returncode == 0, packed.stderr
        (chart,) = out.glob("*.tgz")
        return Release(version, chart, archive, name)

    def close(self) -> None:
        with self._lock:
            for tag in self._tags:
                subprocess.run(["buildah", "manifest", "rm", tag], capture_output=True,
                               check=False, timeout=120)
                subprocess.run(["podman", "rmi", "--force", f"{tag}-{HOST_ARCH}"],
                               capture_output=True, check=False, timeout=120)
            if self._work is not None:
                shutil.rmtree(self._work)
            self._made, self._work, self._tags = None, None, []


def _version(tree: Path) -> str:
    text = (tree / "cni_delguard" / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    assert match is not None
    return match.group(1)


def _head() -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True, timeout=60).stdout.strip()
