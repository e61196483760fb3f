#!/usr/bin/env python3
"""render-matrix.py: docs/compatibility.md's runtime tables from the last matrix (.cache/e2e/).

    tools/render-matrix.py            print the table the matrix gives
    tools/render-matrix.py --write    rewrite the page's tables (between its matrix markers)
    tools/render-matrix.py --check    exit 1 with a diff when the page and the matrix differ

--matrix PATH reads another matrix file (default: DELGUARD_E2E_CACHE/matrix.json, else
.cache/e2e/matrix.json). The e2e suites write the matrix (tests/support/matrix.py); the rendering
is tests/support/matrix_readme.py, which tests/test_readme_matrix.py checks the page against.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import matrix, matrix_readme


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the page's tables")
    mode.add_argument("--check", action="store_true", help="exit 1 when the page disagrees")
    parser.add_argument("--matrix", type=Path, default=None, help="the matrix file")
    args = parser.parse_args(argv)
    source = args.matrix or matrix.path()
    if not source.is_file():
        sys.stderr.write(f"render-matrix: no matrix at {source}: run the e2e suites first\n")
        return 2
    rows = matrix.load(source)
    readme = matrix_readme.readme_path()
    text = readme.read_text(encoding="utf-8")
    if args.write:
        readme.write_text(matrix_readme.rewritten(text, rows), encoding="utf-8")
        return 0
    if args.check:
        changes = matrix_readme.diff(text, rows)
        sys.stdout.write(changes)
        return 1 if changes else 0
    sys.stdout.write(matrix_readme.render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
