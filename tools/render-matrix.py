#!/usr/bin/env python3
"""render-matrix.py: the matrix of record, and the pages rendered from it.

    tools/render-matrix.py             print what the pages' tables would be (the file of record)
    tools/render-matrix.py --write     make the run's matrix (.cache/e2e/matrix.json) the file of
                                       record (delguard_build/matrix.json), then render from it
                                       README.md's and docs/compatibility.md's tables and the
                                       verdicts assess ships (cni_delguard/ops/assess/verdicts.json)
    tools/render-matrix.py --render    only render the pages and the verdicts from the record
    tools/render-matrix.py --check     exit 1 with a diff when a page or the verdicts are not the
                                       render of the file of record

The e2e suites write the run's matrix (tests/support/matrix.py) under their checkout's commit and
the UTC date; --write refuses a run whose rows come from several commits (or from no known one),
and one that lacks rows the file of record has (--allow-fewer writes it all the same). The
rendering is delguard_build (render.py, verdicts.py); tests/test_readme_matrix.py checks the pages
and the verdicts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from delguard_build import matrix, render, verdicts  # noqa: E402 (this checkout's package)
from tests.support import matrix as run_matrix  # noqa: E402

RECORD = REPO / matrix.RECORD
VERDICTS = REPO / verdicts.TARGET


def record(source: Path, allow_fewer: bool) -> str | None:
    """Write the run's matrix as the file of record; why not, when it is refused."""
    if not source.is_file():
        return f"no matrix at {source}: run the e2e suites first"
    run = run_matrix.load(source)
    if not run.rows:
        return f"{source} holds no row"
    stamps = run_matrix.commits(run.commit)
    if len(stamps) > 1 or matrix.UNKNOWN in stamps:
        return (f"{source}: rows of commit(s) {run.commit}; the file of record is one run of one "
                "commit (tools/test.sh starts from an empty matrix)")
    old = matrix.loads(RECORD.read_text(encoding="utf-8")) if RECORD.is_file() else None
    lost = sorted({(r.chain, r.driver, r.runtime, r.version) for r in old.rows}
                  - {(r.chain, r.driver, r.runtime, r.version) for r in run.rows}
                  ) if old else []
    if lost and not allow_fewer:
        return ("the run has no row for " + "; ".join(" ".join(k) for k in lost) +
                " which the file of record has (--allow-fewer drops them)")
    RECORD.write_text(run.dumps(), encoding="utf-8")
    return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true",
                      help="the run's matrix becomes the file of record; render from it")
    mode.add_argument("--render", action="store_true",
                      help="render the pages and the verdicts from the file of record")
    mode.add_argument("--check", action="store_true",
                      help="exit 1 when a page or the verdicts are not the render of the record")
    parser.add_argument("--matrix", type=Path, default=None,
                        help="the run's matrix (default: DELGUARD_E2E_CACHE/matrix.json, else "
                        ".cache/e2e/matrix.json)")
    parser.add_argument("--allow-fewer", action="store_true",
                        help="--write even when the run lacks rows the file of record has")
    args = parser.parse_args(argv)
    if args.write:
        why = record(args.matrix or run_matrix.path(), args.allow_fewer)
        if why:
            sys.stderr.write(f"render-matrix: {why}\n")
            return 2
    packaged = matrix.loads(RECORD.read_text(encoding="utf-8"))
    changed = 0
    shipped = verdicts.dumps(packaged)
    if args.write or args.render:
        VERDICTS.write_text(shipped, encoding="utf-8")
    elif args.check and VERDICTS.read_text(encoding="utf-8") != shipped:
        sys.stdout.write(f"{verdicts.TARGET} is not the render of {matrix.RECORD}\n")
        changed += 1
    for target in render.TARGETS:
        page = REPO / target.page
        text = page.read_text(encoding="utf-8")
        if args.write or args.render:
            page.write_text(render.rewritten(text, target, packaged), encoding="utf-8")
        elif args.check:
            changes = render.diff(text, target, packaged)
            sys.stdout.write(changes)
            changed += bool(changes)
        else:
            sys.stdout.write(f"{target.page}:\n{render.render(target, packaged)}\n")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
