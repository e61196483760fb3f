#!/usr/bin/env python3
"""render.py: every file generated from code or data, written or checked in one place.

    tools/render.py [--check] [GROUP...]    change nothing; exit 1 with a diff naming each file
                                            that is not the render of its sources
    tools/render.py --write [GROUP...]      write every such file again
    tools/render.py --record [--matrix M] [--allow-fewer]
                                            make a run's matrix (.cache/e2e/matrix.json) the
                                            matrix of record (delguard_build/matrix.json), then
                                            write every file again

GROUPs (all by default; delguard_build/generated.py says what each holds):
    matrix   README.md's fixes table, docs/compatibility.md's tables and the verdicts assess ships
             (cni_delguard/ops/assess/verdicts.json), from delguard_build/matrix.json
    rules    a kustomize overlay's prometheusrule.yaml from its settings.yaml: the repository's
             overlays/monitoring, or each --overlay DIR (a user's copy of it)
    keys     docs/configuration.md's keys table, from the config model
    chart    the Helm chart's generated parts (tools/generate-chart.py, run as it is)

The e2e suites write the run's matrix (tests/support/matrix.py) under their checkout's commit and
the UTC date; --record refuses a run whose rows come from several commits (or from no known one),
and one that lacks rows the file of record has (--allow-fewer records it all the same). Exit 0
when every file is current (or written), 1 when --check found one that is not, 2 on an error.
Needs PyYAML (Debian: python3-yaml).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from delguard_build import generated, matrix  # noqa: E402 (this checkout's package)
from tests.support import matrix as run_matrix  # noqa: E402

GROUPS = (*generated.GROUPS, "chart")


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
    path = REPO / matrix.RECORD
    old = matrix.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    lost = sorted({(r.chain, r.driver, r.runtime, r.version) for r in old.rows}
                  - {(r.chain, r.driver, r.runtime, r.version) for r in run.rows}
                  ) if old else []
    if lost and not allow_fewer:
        return ("the run has no row for " + "; ".join(" ".join(k) for k in lost) +
                " which the file of record has (--allow-fewer drops them)")
    path.write_text(run.dumps(), encoding="utf-8")
    return None


def shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def chart(write: bool) -> int:
    """tools/generate-chart.py's exit code (it names each stale file on stderr)."""
    command = [sys.executable, str(REPO / "tools/generate-chart.py")] + ([] if write else
                                                                          ["--check"])
    return subprocess.run(command, check=False, timeout=300).returncode


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="change nothing; exit 1 when a file is not current (the default)")
    mode.add_argument("--write", action="store_true", help="write every file that is not current")
    mode.add_argument("--record", action="store_true",
                      help="the run's matrix becomes the file of record; then --write")
    parser.add_argument("--matrix", type=Path, default=None,
                        help="--record's run matrix (default: DELGUARD_E2E_CACHE/matrix.json, "
                        "else .cache/e2e/matrix.json)")
    parser.add_argument("--allow-fewer", action="store_true",
                        help="--record even when the run lacks rows the file of record has")
    parser.add_argument("--overlay", type=Path, action="append", metavar="DIR",
                        help="render the rules of this kustomize overlay instead of the "
                        "repository's overlays/monitoring (repeatable; implies the group rules)")
    parser.add_argument("groups", nargs="*", metavar="GROUP", choices=[[], *GROUPS],
                        help=f"{', '.join(GROUPS)} (default: all; with --overlay: rules)")
    args = parser.parse_args(argv)
    groups = args.groups or (["rules"] if args.overlay else list(GROUPS))
    if args.overlay and "rules" not in groups:
        parser.error("--overlay renders the group rules")
    if args.record:
        why = record(args.matrix or run_matrix.path(), args.allow_fewer)
        if why:
            sys.stderr.write(f"render: {why}\n")
            return 2
    write = args.write or args.record
    try:
        found = generated.outputs(REPO, [g for g in groups if g != "chart"], args.overlay)
    except (generated.RenderError, OSError) as exc:
        sys.stderr.write(f"render: {exc}\n")
        return 2
    stale = [o for o in found if o.stale]
    for output in stale:
        if write:
            output.path.write_text(output.wanted, encoding="utf-8")
            sys.stderr.write(f"render: {shown(output.path)} written\n")
        else:
            sys.stdout.write(generated.diff(output, REPO) or f"{shown(output.path)}: missing\n")
            sys.stderr.write(f"render: {shown(output.path)} is not current "
                             "(tools/render.py --write)\n")
    rc = 1 if stale and not write else 0
    if "chart" in groups:
        charted = chart(write)
        if charted:
            rc = max(rc, charted)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
