"""tests/support/matrix.py: the run's matrix, one row per key, atomic rewrite, stamped with the
checkout's commit and the date; a file of the older shape (a bare list) is read too."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support import matrix


def _row(**changes: object) -> matrix.Row:
    base: dict[str, object] = {"runtime": "containerd", "version": "2.1.6",
                               "chain": "fake-stateful", "scenario": "double-del",
                               "guard": True, "outcome": "removed", "seconds": 1.5}
    base.update(changes)
    return matrix.Row(**base)  # type: ignore[arg-type]


def test_a_later_row_replaces_the_one_of_its_key(tmp_path: Path) -> None:
    where = tmp_path / "e2e" / "matrix.json"
    matrix.record(_row(outcome="stuck", guard=False), where)
    matrix.record(_row(), where)
    matrix.record(_row(outcome="removed", seconds=2.0, kept=1), where)
    rows = matrix.load(where).rows
    assert [(r.guard, r.outcome, r.seconds, r.kept) for r in rows] == [
        (False, "stuck", 1.5, None), (True, "removed", 2.0, 1)]
    assert sorted(p.name for p in where.parent.iterdir()) == ["matrix.json", "matrix.json.lock"]


def test_the_file_names_this_checkouts_commit_and_todays_date(tmp_path: Path) -> None:
    where = tmp_path / "matrix.json"
    matrix.record(_row(), where)
    data = json.loads(where.read_text())
    assert set(data) == {"commit", "date", "rows"}
    head = subprocess.run(["git", "-C", str(matrix.REPO), "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert data["commit"] in (head, head + "+dirty")
    assert data["date"] == matrix.today()


@pytest.mark.parametrize(
    ("old", "now", "expected"),
    [
        pytest.param(("a", True), "a", "a", id="same-commit"),
        pytest.param(("a", True), "b", "a + b", id="another-commit"),
        pytest.param(("a + b", True), "b", "a + b", id="already-both"),
        pytest.param(("a", False), "b", "b", id="old-file-empty"),
        pytest.param((matrix.UNKNOWN, True), "b", "unknown + b", id="old-shape-with-rows"),
    ],
)
def test_rows_of_another_commit_are_kept_and_said(old: tuple[str, bool], now: str,
                                                  expected: str) -> None:
    stamp, has_rows = old
    rows = (_row(),) if has_rows else ()
    new = matrix.stamped(matrix.Matrix(stamp, "2026-01-01", rows), rows, now, "2026-01-02")
    assert (new.commit, new.date) == (expected, "2026-01-02")


def test_a_list_shaped_file_is_read_and_rewritten_in_the_new_shape(tmp_path: Path) -> None:
    where = tmp_path / "matrix.json"
    where.write_text(json.dumps([_row(guard=False, outcome="stuck").as_dict()]))
    assert len(matrix.load(where).rows) == 1
    matrix.record(_row(), where)
    data = json.loads(where.read_text())
    assert len(data["rows"]) == 2 and data["commit"].startswith("unknown + ")


def test_no_file_is_an_empty_matrix(tmp_path: Path) -> None:
    assert matrix.load(tmp_path / "matrix.json").rows == ()
