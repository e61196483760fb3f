"""The run's matrix: the e2e suites record what each runtime did in each scenario.

Every end-to-end scenario records one row when it ends (delguard_build/matrix.py: the
row, its closed vocabularies, the file's shape). Rows go into .cache/e2e/matrix.json
(DELGUARD_E2E_CACHE moves the dir), one per key, a later run's row replacing an earlier one's,
under the commit of this checkout (`git rev-parse HEAD`, "+dirty" when `git status` shows any
change) and the UTC date. Rows recorded under another commit are kept and the file then says
both commits ("A + B"): `tools/render.py --record`, which makes such a run the file of
record (delguard_build/matrix.json) that README and docs/compatibility.md render,
refuses a file of several commits (tools/test.sh starts every run from an empty matrix).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from delguard_build.matrix import (  # noqa: F401 - the suites' vocabulary, from here
    CHAINS,
    DRIVERS,
    OUTCOMES,
    REPORTED_SCENARIOS,
    RUNTIMES,
    SCENARIOS,
    SLOW_ADD_SCENARIOS,
    UNKNOWN,
    Matrix,
    MatrixError,
    Row,
    loads,
)

REPO = Path(__file__).resolve().parents[2]
SEVERAL = " + "  # between the commits of a file whose rows come from more than one


def path() -> Path:
    cache = Path(os.environ.get("DELGUARD_E2E_CACHE", str(REPO / ".cache" / "e2e")))
    return cache / "matrix.json"


@functools.cache
def commit() -> str:
    """This checkout's commit, "+dirty" when its tree has changes (tracked or untracked files
    git does not ignore); "unknown" without git (a source tarball). Once per process: a file
    edited while the suites run does not split one run in two."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=60, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"],
                                capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    return head + ("+dirty" if status.strip() else "")


def today() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())


def commits(stamp: str) -> list[str]:
    return stamp.split(SEVERAL)


def load(where: Path | None = None) -> Matrix:
    """The last matrix (no rows, commit and date unknown, when there is no file yet)."""
    try:
        return loads((where or path()).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Matrix(UNKNOWN, UNKNOWN, ())


@contextlib.contextmanager
def _locked(target: Path) -> Iterator[None]:
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def stamped(old: Matrix, rows: tuple[Row, ...], now: str, date: str) -> Matrix:
    """The file after a record: `now`'s commit joined to the old file's when they differ (and
    the old file held rows), the date of this record."""
    known = commits(old.commit) if old.rows else []
    return Matrix(SEVERAL.join(dict.fromkeys([*known, now])), date, rows)


def record(row: Row, where: Path | None = None) -> None:
    """Put row into the matrix, replacing the row of the same key; atomic, serialized."""
    target = where or path()
    with _locked(target):
        old = load(target)
        rows = {r.key: r for r in old.rows}
        rows[row.key] = row
        new = stamped(old, tuple(rows.values()), commit(), today())
        fd, tmp = tempfile.mkstemp(prefix=".matrix-", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(new.dumps())
        os.replace(tmp, target)
