"""The pages' tables are the render of the matrix of record, and the matrix of record is what the
suites measure: README cannot claim a cell the suite did not measure.

- README.md's "Does it fix my problem?" table, docs/compatibility.md's tables and the verdicts
  `cni-delguard assess` ships are the render of delguard_build/matrix.json: tests/test_render.py
  (tools/render.py --check).
- The run's matrix (.cache/e2e/matrix.json, which the e2e suites fill as they run) and the file
  of record hold the same cases with the same outcomes, and the guard kept a DEL from the
  delegate in the same cases; the seconds, the exact counts, the commit and the date may differ.
  tests/conftest.py runs this after every other test of the session, so that in a whole run
  (tools/test.sh, CI) it checks the matrix that very run wrote (tools/test.sh removes the
  previous one first). Without a run's matrix it is skipped in the quick loop, and fails under
  CI, where the e2e suites have just run. When they differ and the run is the one to publish:
  tools/render.py --record.
"""

from __future__ import annotations

import os

import pytest

from delguard_build import matrix, render
from tests.support import matrix as run_matrix

REPO = run_matrix.REPO


def _cases(m: matrix.Matrix) -> dict[tuple[str, str, str, str, str, bool], tuple[str, bool]]:
    return {r.key: (r.outcome, bool(r.kept)) for r in m.rows}


def test_the_run_measured_what_the_file_of_record_says() -> None:
    source = run_matrix.path()
    if not source.is_file():
        why = f"no matrix at {source}: the e2e suites (tests/e2e_cri, ...) write it"
        if os.environ.get("CI"):
            pytest.fail(f"{why}, and under CI they run before this test")
        pytest.skip(why)
    run, record = run_matrix.load(source), matrix.record()
    assert run.rows, f"{source} holds no row"
    ran, claimed = _cases(run), _cases(record)
    missing = sorted(set(claimed) - set(ran))
    extra = sorted(set(ran) - set(claimed))
    differ = sorted((k, claimed[k], ran[k]) for k in set(ran) & set(claimed)
                    if ran[k] != claimed[k])
    assert not (missing or extra or differ), (
        f"the run ({run.commit}, {run.date}) and {render.RECORD} ({record.commit}, "
        f"{record.date}) differ; if the run is the one to publish, tools/render.py "
        f"--record\nnot run: {missing}\nnot in the record: {extra}\n"
        f"(case, recorded (outcome, kept), run): {differ}")
