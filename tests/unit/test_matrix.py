"""tests/support/matrix.py: closed vocabularies, one row per key, atomic rewrite."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import matrix


def _row(**changes: object) -> matrix.Row:
    base: dict[str, object] = {"runtime": "containerd", "version": "2.1.6",
                               "delegate": "fake-stateful", "scenario": "double-del",
                               "guard": True, "outcome": "removed", "seconds": 1.5}
    base.update(changes)
    return matrix.Row(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"runtime": "docker"}, id="runtime"),
        pytest.param({"scenario": "double_del"}, id="scenario"),
        pytest.param({"outcome": "ok"}, id="outcome"),
        pytest.param({"driver": "crictl"}, id="driver"),
        pytest.param({"delegate": "multus"}, id="delegate"),
        pytest.param({"version": ""}, id="no-version"),
        pytest.param({"guard": 1}, id="guard-not-bool"),
        pytest.param({"seconds": -1.0}, id="negative-seconds"),
    ],
)
def test_refuses_rows_outside_the_vocabulary(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="matrix"):
        _row(**changes)


def test_a_later_row_replaces_the_one_of_its_key(tmp_path: Path) -> None:
    where = tmp_path / "e2e" / "matrix.json"
    matrix.record(_row(outcome="stuck", guard=False), where)
    matrix.record(_row(), where)
    matrix.record(_row(outcome="removed", seconds=2.0), where)
    rows = matrix.load(where)
    assert [(r.guard, r.outcome, r.seconds) for r in rows] == [(False, "stuck", 1.5),
                                                               (True, "removed", 2.0)]
    assert sorted(p.name for p in where.parent.iterdir()) == ["matrix.json", "matrix.json.lock"]


def test_no_file_is_an_empty_matrix(tmp_path: Path) -> None:
    assert matrix.load(tmp_path / "matrix.json") == []
