"""docs/compatibility.md's runtime tables are the last matrix, rendered (tools/render-matrix.py).

The e2e suites record their rows into .cache/e2e/matrix.json as they run; this test renders them
and compares with docs/compatibility.md. tests/conftest.py runs it after every other test of the
session, so that in a whole run (tools/test.sh, CI) it checks the matrix that very run wrote
(tools/test.sh removes the previous one first). Without a matrix it is skipped in the quick
loop, and fails under CI, where the e2e suites have just run.
"""

from __future__ import annotations

import os

import pytest

from tests.support import matrix, matrix_readme


def test_readme_table_is_the_last_matrix() -> None:
    source = matrix.path()
    if not source.is_file():
        why = f"no matrix at {source}: the e2e suites (tests/e2e_cri, ...) write it"
        if os.environ.get("CI"):
            pytest.fail(f"{why}, and under CI they run before this test")
        pytest.skip(why)
    rows = matrix.load(source)
    assert rows, f"{source} holds no row"
    readme = matrix_readme.readme_path().read_text(encoding="utf-8")
    changes = matrix_readme.diff(readme, rows)
    assert not changes, (
        "docs/compatibility.md's runtime tables differ from the last matrix; if the run is the "
        "one to publish, "
        f"tools/render-matrix.py --write\n{changes}"
    )


@pytest.mark.parametrize(
    ("guards", "cell"),
    [
        pytest.param(("stuck", "removed"), "stuck → **removed**", id="guard-changes-it"),
        pytest.param(("stuck", "stuck"), "stuck → stuck", id="same"),
        pytest.param(("removed", None), "removed → -", id="with-guard-missing"),
    ],
)
def test_cell(guards: tuple[str, str | None], cell: str) -> None:
    rows = [matrix.Row("containerd", "v2.1.6", "fake-stateful", "reboot", guard, outcome, 1.0)
            for guard, outcome in zip((False, True), guards, strict=True) if outcome]
    table = matrix_readme.render(rows)
    assert f"| reboot | {cell} |" in table, table
    assert "containerd v2.1.6" in table


def test_columns_in_runtime_then_version_order() -> None:
    rows = [matrix.Row(rt, v, "fake-stateful", "double-del", False, "stuck", 1.0)
            for rt, v in (("cri-o", "1.36.3"), ("containerd", "v2.1.6"),
                          ("containerd", "1.6.20~ds1"), ("containerd", "v1.7.35"))]
    header = matrix_readme.render(rows).splitlines()[2]
    assert header == ("| scenario | containerd 1.6.20~ds1 | containerd v1.7.35 | "
                      "containerd v2.1.6 | CRI-O 1.36.3 |"), header


def test_readme_without_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="matrix:begin"):
        matrix_readme.split("# README\nno table here\n")
