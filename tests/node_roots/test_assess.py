"""`cni-delguard assess` (the frozen binary, the product) on node roots: one per kind of chain the
matrix ran and per runtime row of the e2e suites, and roots the matrix never measured.

Each root holds what a node of that kind holds (tests/support/assessroot.py: the confs as their
writers write them, wrapped by the installer's own patch.wrap, the real multus v4.3.0 binaries)
and the runtime row's real binary where its package puts it (/usr/bin/containerd, /usr/bin/crio).
assess runs none of them: it is given the runtime as the kubelet reports it (`--runtime
NAME://VERSION`, the version the row's binary reports when this test asks it) and multus's
version (`--multus-version`), as README's command gives them. What assess prints must be what
the matrix of record says for that range and chain (delguard_build/verdict.py, computed here
from the file the shipped verdicts were built from), which versions it rests on, and
"unmeasured" where the matrix has nothing: a root whose chain no run measured (multus thin with
`clusterNetwork` a name), one without any runtime.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cni_delguard.ops.assess import chains
from delguard_build import matrix, ranges, verdict
from tests.e2e_cri.runtimes import RUNTIMES, Runtime
from tests.support import assessroot, guard, peers
from tests.support.installerproc import command
from tests.support.noderoot import needs_root

pytestmark = pytest.mark.integration


def assess(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command(), "assess", "--root", str(root), *args],
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def multus_shim() -> dict[str, Path]:
    peer = peers.built_or_skip("multus", "v4.3.0")
    return {"multus": peer.bin("multus"), "multus-shim": peer.bin("multus-shim")}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    needs_root()
    if guard.under_test() == "frozen":
        guard.frozen_or_skip()
    return tmp_path / "node"


def runtime_binary(row: Runtime, root: Path) -> str:
    """The row's daemon binary into the root where its package puts it (assess must not run
    it); the version it reports, as the kubelet would report it."""
    try:
        source = row.bin(row.daemon)
    except LookupError as exc:  # a peer not built: skipped here, a failure under CI
        if os.environ.get("CI"):
            pytest.fail(f"{exc} (CI builds every peer first)")
        pytest.skip(str(exc))
    target = root / "usr/bin" / row.daemon
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    return row.version()


def expected(rt: str, version: str, kind: str) -> list[dict[str, object]]:
    """What the matrix of record says for that range and kind: per measured chain, the lists."""
    where = ranges.of(rt, version)
    assert where is not None, (rt, version)
    out = []
    for name in chains.BY_NAME[kind].chains:
        v = verdict.verdict(matrix.record().rows, where, name)
        if v.measured:
            out.append({"chain": name, "versions": list(v.versions),
                        "thisVersion": version in v.versions,
                        "stuckWithout": v.stuck_without, "freed": v.named(verdict.FREED),
                        "stuckWithGuard": v.named(verdict.STUCK)})
    return out


@pytest.mark.parametrize("row", RUNTIMES, ids=lambda r: r.key)
@pytest.mark.parametrize("chain", assessroot.CHAINS, ids=lambda c: c.name)
def test_assess_says_what_the_matrix_says_for_the_node(
    root: Path, chain: assessroot.Chain, row: Runtime, multus_shim: dict[str, Path]
) -> None:
    version = runtime_binary(row, root)
    assessroot.write(root, chain, wrapped=True,
                     multus_bin=multus_shim.get(chain.multus or ""))
    given = ["--runtime", f"{row.runtime}://{version}", "--multus-version", "v4.3.0"]
    done = assess(root, *given, "--output", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["runtime"]["name"] == row.runtime and doc["runtime"]["version"] == version
    assert doc["runtime"]["from"] == f"--runtime {row.runtime}://{version}"
    assert doc["range"]["name"] == ranges.of(row.runtime, version).name  # type: ignore[union-attr]
    assert doc["chain"]["kind"] == chain.kind
    assert doc["behind"]["multusVersion"] == ("v4.3.0" if chain.multus else None)
    want = expected(row.runtime, version, chain.kind)
    got = [{k: m[k] for k in want[0]} for m in doc["measured"]] if want else doc["measured"]
    assert got == want
    assert doc["status"] == ("measured" if want else "unmeasured")
    assert doc["matrix"] == {"commit": matrix.record().commit, "date": matrix.record().date}
    text = assess(root, *given)
    assert text.returncode == 0, text.stderr
    assert (f"runtime:  {row.runtime} {version}, from --runtime {row.runtime}://{version}"
            in text.stdout)
    for m in want:
        assert f"  {m['chain']} (" in text.stdout


def test_a_chain_no_run_measured_is_unmeasured(root: Path, multus_shim: dict[str, Path]) -> None:
    version = runtime_binary(RUNTIMES[0], root)
    assessroot.write(root, assessroot.THIN_NAME, wrapped=True, multus_bin=multus_shim["multus"])
    done = assess(root, "--runtime", f"containerd://{version}")
    assert done.returncode == 0, done.stderr
    assert f"containerd {version}" in done.stdout
    assert "unmeasured: the matrix ran no chain of this kind (multus thin, `clusterNetwork` a " \
           "network's name)" in done.stdout
    assert "summary:" in done.stdout and "unmeasured" in done.stdout.splitlines()[-1]


def test_a_node_without_a_runtime_is_unmeasured(root: Path) -> None:
    assessroot.write(root, assessroot.BY_NAME["plain"], wrapped=False)
    done = assess(root, "--output", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["runtime"], doc["status"]) == (None, "unmeasured")
    assert doc["unmeasuredBecause"].startswith("the runtime was not found")


def test_a_root_that_is_not_a_directory_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    done = assess(tmp_path / "file")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1 and "cannot read the node" in done.stderr
