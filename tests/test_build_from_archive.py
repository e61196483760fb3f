"""tools/build.sh from a source tarball: `git archive` of a commit builds the bundle that a git
checkout of that commit builds, byte for byte (every file's path, kind, mode bit, size and
sha256: node/bundle.py's tree digest).

Before, build.sh took its inputs from `git ls-files` and its SOURCE_DATE_EPOCH from `git log`: in
a tarball the first listed nothing and the second fell back to 0. The checkout's build is usually
the cached one tools/test.sh made of the same commit; the tarball's is built for real
(--no-cache), about 40 s here.
"""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest

from cni_delguard.node import bundle
from tests.support.guard import REPO
from tests.support.noderoot import needs_root

pytestmark = pytest.mark.build


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          timeout=300).stdout.strip()


def build(tree: Path, *flags: str) -> Path:
    r = subprocess.run([str(tree / "tools/build.sh"), *flags], cwd=tree, capture_output=True,
                       text=True, timeout=1800, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return tree / "dist" / "cni-delguard"


def test_a_git_archive_builds_the_bundle_a_checkout_builds(tmp_path: Path) -> None:
    needs_root()
    head = git("rev-parse", "HEAD")
    checkout, archive = tmp_path / "checkout", tmp_path / "archive"
    git("clone", "--quiet", "--no-checkout", "--shared", str(REPO), str(checkout))
    git("checkout", "--quiet", "--detach", head, cwd=checkout)
    tarball = tmp_path / "src.tar"
    git("archive", "--output", str(tarball), head)
    with tarfile.open(tarball) as tar:
        tar.extractall(archive, filter="tar")
    assert not (archive / ".git").exists()
    stamp = (archive / "tools/source-date-epoch").read_text().strip()
    assert stamp == git("log", "-1", "--format=%ct", head)

    from_checkout = build(checkout)
    from_archive = build(archive, "--no-cache")
    assert bundle.tree_digest(str(from_archive)) == bundle.tree_digest(str(from_checkout))
