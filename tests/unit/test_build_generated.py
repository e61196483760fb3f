"""delguard_build/generated.py: each group's files and what they should hold, on a copy of the
repository's sources (tests/test_render.py runs the tool on the repository itself)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from delguard_build import generated, keys, matrix, render, rules, verdicts

REPO = Path(__file__).resolve().parents[2]
SOURCES = (matrix.RECORD, verdicts.TARGET, *{t.page for t in render.TARGETS}, keys.PAGE,
           rules.TEMPLATE, f"{rules.OVERLAY}/settings.yaml",
           f"{rules.OVERLAY}/prometheusrule.yaml")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for name in SOURCES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


@pytest.mark.parametrize(
    ("group", "names"),
    [
        pytest.param("matrix", {verdicts.TARGET, "README.md", "docs/compatibility.md"},
                     id="matrix"),
        pytest.param("rules", {f"{rules.OVERLAY}/prometheusrule.yaml"}, id="rules"),
        pytest.param("keys", {keys.PAGE}, id="keys"),
    ],
)
def test_each_group_names_its_files_and_they_are_current(repo: Path, group: str,
                                                         names: set[str]) -> None:
    found = generated.outputs(repo, [group])
    assert {str(o.path.relative_to(repo)) for o in found} == names
    assert [o for o in found if o.stale] == []


@pytest.mark.parametrize(
    ("name", "edit", "group"),
    [
        pytest.param("README.md", lambda t: t.replace("| --- |", "| - |", 1), "matrix",
                     id="readme-table"),
        pytest.param(verdicts.TARGET, lambda t: t.replace('"schema": 1', '"schema": 2'),
                     "matrix", id="verdicts"),
        pytest.param(keys.PAGE, lambda t: t.replace("| `mode` |", "| `mood` |"), "keys",
                     id="keys-table"),
        pytest.param(f"{rules.OVERLAY}/settings.yaml",
                     lambda t: t.replace("scrapeInterval: 15s", "scrapeInterval: 60s"), "rules",
                     id="settings-changed"),
    ],
)
def test_an_edit_makes_a_file_stale_and_the_diff_names_it(repo: Path, name, edit,
                                                          group: str) -> None:
    path = repo / name
    text = path.read_text(encoding="utf-8")
    assert edit(text) != text
    path.write_text(edit(text), encoding="utf-8")
    stale = [o for o in generated.outputs(repo, [group]) if o.stale]
    assert len(stale) == 1
    assert str(stale[0].path.relative_to(repo)) in generated.diff(stale[0], repo)


def test_a_missing_file_is_stale(repo: Path) -> None:
    (repo / verdicts.TARGET).unlink()
    (output,) = [o for o in generated.outputs(repo, ["matrix"]) if o.stale]
    assert output.now is None and output.path == repo / verdicts.TARGET


@pytest.mark.parametrize(
    ("name", "edit", "group", "why"),
    [
        pytest.param(keys.PAGE, lambda t: t.replace("<!-- keys:end -->", ""), "keys",
                     "keys:end", id="keys-markers"),
        pytest.param("docs/compatibility.md", lambda t: t.replace("<!-- matrix:end -->", ""),
                     "matrix", "matrix:end", id="matrix-markers"),
        pytest.param(f"{rules.OVERLAY}/settings.yaml", lambda t: t.replace(
            "kind: MonitoringSettings", "kind: ConfigMap"), "rules", "MonitoringSettings",
            id="not-settings"),
    ],
)
def test_a_source_that_cannot_be_rendered_is_refused(repo: Path, name, edit, group: str,
                                                     why: str) -> None:
    path = repo / name
    path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(generated.RenderError, match=why):
        generated.outputs(repo, [group])


def test_an_unknown_group_is_refused(repo: Path) -> None:
    with pytest.raises(generated.RenderError, match="tables"):
        generated.outputs(repo, ["tables"])


def test_other_overlays_replace_the_repositorys(repo: Path, tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    shutil.copy(repo / rules.OVERLAY / "settings.yaml", own)
    (output,) = generated.outputs(repo, ["rules"], [own])
    assert output.path == own / "prometheusrule.yaml" and output.now is None
