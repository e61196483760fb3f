"""The frozen bundle holds what runs on a node and nothing the tools alone need.

The matrix of record, its validation, the pages' rendering, the verdicts' prose and the alert
rules' rendering live in delguard_build (tools/ and tests import it); `cni-delguard assess`
ships only the verdicts worked out from them (cni_delguard/ops/assess/verdicts.json). Checked
twice: no module of cni_delguard imports delguard_build (what PyInstaller's analysis would
follow from the package it collects), and the built bundle's own listing (dist/cni-delguard/
_internal, loose .pyc files: the spec's noarchive) holds none of those modules or files, and
answers `assess` from its shipped verdicts.
"""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest

from tests.support import guard

REPO = Path(__file__).resolve().parents[1]
# What must not be frozen: the build-time package, and where its modules lived in the product.
NOT_FROZEN = ("delguard_build", "cni_delguard/ops/assess/matrix", "cni_delguard/ops/assess/render",
              "cni_delguard/ops/assess/verdict.", "cni_delguard/ops/assess/cri",
              "cni_delguard/monitoring/rules")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", sorted((REPO / "cni_delguard").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_no_product_module_imports_the_build_time_package(path: Path) -> None:
    assert not {m for m in _imports(path) if m.split(".")[0] == "delguard_build"}


def test_the_spec_collects_the_product_alone() -> None:
    spec = (REPO / "packaging/cni-delguard.spec").read_text(encoding="utf-8")
    assert 'collect_submodules("cni_delguard")' in spec
    assert '"delguard_build",' in spec  # excluded: a stray import could not pull it in
    assert "ops/assess/verdicts.json" in spec and "matrix.json" not in spec


def test_the_bundle_holds_no_render_rule_or_matrix_validation_code(tmp_path: Path) -> None:
    binary = guard.frozen_or_skip()
    internal = binary.parent / "_internal"
    listing = sorted(str(p.relative_to(internal)) for p in internal.rglob("*"))
    modules = [p for p in listing if p.endswith((".pyc", ".py"))]
    assert any(p.startswith("cni_delguard/ops/assess/report") for p in modules)  # a real list
    assert [p for p in listing if p.startswith(NOT_FROZEN)] == []
    assert "cni_delguard/ops/assess/verdicts.json" in listing
    assert not [p for p in listing if p.endswith("matrix.json")]
    # and assess answers from what it ships
    (tmp_path / "etc/cni/net.d").mkdir(parents=True)
    (tmp_path / "etc/cni/net.d/10-x.conf").write_text(json.dumps(
        {"cniVersion": "1.0.0", "name": "x", "type": "bridge"}))
    done = subprocess.run([str(binary), "assess", "--root", str(tmp_path), "--runtime",
                           "containerd://1.6.20~ds1", "--output", "json"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["status"] == "measured" and doc["measured"][0]["chain"] == "fake-stateful"
