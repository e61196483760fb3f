"""python3 -m tools.release: the steps tools/release.sh runs, as a process would call them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tools.release.__main__ import main

REPO = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "c" * 64


def test_set_image_names_the_release_image_and_changes_nothing_else(tmp_path):
    values = tmp_path / "values.yaml"
    shutil.copy(REPO / "charts" / "cni-delguard" / "values.yaml", values)
    before = yaml.safe_load(values.read_text())
    assert main(["set-image", "--repository", "registry.example/x/cni-delguard",
                 "--digest", DIGEST, str(values)]) == 0
    after = yaml.safe_load(values.read_text())
    assert after["image"] == {**before["image"], "repository": "registry.example/x/cni-delguard",
                              "digest": DIGEST}
    assert {k: v for k, v in after.items() if k != "image"} == {
        k: v for k, v in before.items() if k != "image"}


@pytest.mark.parametrize("text", [
    pytest.param("other: 1\n", id="no-image-block"),
    pytest.param("image:\n  tag: x\n", id="no-repository"),
])
def test_set_image_refuses_values_it_cannot_edit(tmp_path, text):
    values = tmp_path / "values.yaml"
    values.write_text(text)
    assert main(["set-image", "--repository", "r", "--digest", DIGEST, str(values)]) == 1
    assert values.read_text() == text


def test_diff_exits_1_and_names_the_file(tmp_path, capsys):
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "SHA256SUMS").write_text(side)
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "a")]) == 0
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert capsys.readouterr().out == "first difference: SHA256SUMS\n"
