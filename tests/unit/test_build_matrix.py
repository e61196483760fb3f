"""delguard_build/matrix.py: closed vocabularies, the file's two shapes, the file of record."""

from __future__ import annotations

import json

import pytest

from delguard_build import matrix


def row(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {"runtime": "containerd", "version": "v2.1.6",
                               "chain": "fake-stateful", "scenario": "double-del",
                               "guard": True, "outcome": "removed", "seconds": 1.5}
    return base | changes


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"runtime": "docker"}, id="runtime"),
        pytest.param({"scenario": "double_del"}, id="scenario"),
        pytest.param({"outcome": "ok"}, id="outcome"),
        pytest.param({"driver": "crictl"}, id="driver"),
        pytest.param({"chain": "multus"}, id="chain"),
        pytest.param({"version": ""}, id="no-version"),
        pytest.param({"guard": 1}, id="guard-not-bool"),
        pytest.param({"seconds": -1.0}, id="negative-seconds"),
        pytest.param({"seconds": float("nan")}, id="nan-seconds"),
        pytest.param({"kept": -1}, id="negative-kept"),
        pytest.param({"kept": True}, id="kept-not-a-count"),
        pytest.param({"kept": 1, "guard": False}, id="kept-without-the-guard"),
        pytest.param({"kubernetes": "v1.37.2"}, id="kubernetes-of-cri-calls"),
        pytest.param({"kubernetes": "", "driver": "kubelet"}, id="empty-kubernetes"),
        pytest.param({"kubernetes": 137, "driver": "cluster"}, id="kubernetes-not-a-string"),
    ],
)
def test_refuses_rows_outside_the_vocabulary(changes: dict[str, object]) -> None:
    with pytest.raises(matrix.MatrixError, match="matrix"):
        matrix.Row(**row(**changes))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "commit", "date", "rows"),
    [
        pytest.param(json.dumps([row()]), matrix.UNKNOWN, matrix.UNKNOWN, 1, id="a-bare-list"),
        pytest.param(json.dumps({"commit": "a" * 40, "date": "2026-01-02", "rows": [row()]}),
                     "a" * 40, "2026-01-02", 1, id="stamped"),
        pytest.param(json.dumps({"commit": "a" * 40 + "+dirty", "date": "2026-01-02",
                                 "rows": []}), "a" * 40 + "+dirty", "2026-01-02", 0, id="empty"),
    ],
)
def test_reads_both_shapes(text: str, commit: str, date: str, rows: int) -> None:
    m = matrix.loads(text)
    assert (m.commit, m.date, len(m.rows)) == (commit, date, rows)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("{", id="not-json"),
        pytest.param('{"commit": "a", "date": "b"}', id="no-rows"),
        pytest.param('{"commit": "a", "date": "b", "rows": [], "x": 1}', id="a-key-more"),
        pytest.param('{"commit": "", "date": "b", "rows": []}', id="empty-commit"),
        pytest.param('{"commit": "a", "date": "b", "rows": {}}', id="rows-not-a-list"),
        pytest.param(json.dumps([row(extra=1)]), id="a-field-more"),
        pytest.param(json.dumps([{"runtime": "containerd"}]), id="fields-missing"),
        pytest.param(json.dumps([row(), row(seconds=2.0)]), id="one-key-twice"),
        pytest.param("42", id="a-number"),
    ],
)
def test_refuses_what_is_not_a_matrix(text: str) -> None:
    with pytest.raises(matrix.MatrixError):
        matrix.loads(text)


def test_dumps_reads_back_the_same_and_leaves_an_uncounted_kept_out() -> None:
    m = matrix.Matrix("b" * 40, "2026-01-02", (
        matrix.Row(**row(guard=False, outcome="stuck")),  # type: ignore[arg-type]
        matrix.Row(**row(kept=2))))  # type: ignore[arg-type]
    text = m.dumps()
    assert matrix.loads(text) == matrix.Matrix(m.commit, m.date, tuple(sorted(
        m.rows, key=lambda r: r.key)))
    first, second = json.loads(text)["rows"]
    assert "kept" not in first and second["kept"] == 2
    assert "kubernetes" not in first and "kubernetes" not in second


def test_one_run_on_two_kubernetes_releases_is_two_rows_that_say_which() -> None:
    old, new = (matrix.Row(**row(driver="kubelet", kubernetes=k))  # type: ignore[arg-type]
                for k in ("v1.35.4", "v1.37.2"))
    assert old.key != new.key
    text = matrix.Matrix("b" * 40, "2026-01-02", (new, old)).dumps()
    assert [r["kubernetes"] for r in json.loads(text)["rows"]] == ["v1.35.4", "v1.37.2"]
    assert matrix.loads(text).rows == (old, new)


@pytest.mark.parametrize(
    ("commit", "short"),
    [
        pytest.param("0123456789abcdef" * 2 + "01234567", "0123456789ab", id="clean"),
        pytest.param("0123456789abcdef" * 2 + "01234567+dirty", "0123456789ab+dirty",
                     id="dirty"),
        pytest.param("unknown", "unknown", id="unknown"),
    ],
)
def test_short_commit(commit: str, short: str) -> None:
    assert matrix.Matrix(commit, "d", ()).short_commit == short


def test_a_row_that_names_its_chain_delegate_is_read() -> None:
    old = {k if k != "chain" else "delegate": v for k, v in row().items()}
    assert matrix.loads(json.dumps([old])).rows[0].chain == "fake-stateful"


def test_the_file_of_record_is_valid() -> None:
    m = matrix.record()
    assert m.commit and m.date
    assert all(isinstance(r, matrix.Row) for r in m.rows)
