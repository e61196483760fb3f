"""tools/run-lanes.py: every test file runs in exactly one lane, and the matrix's page check runs
after all of them, never inside a lane."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("run_lanes", REPO / "tools" / "run-lanes.py")
assert _spec is not None and _spec.loader is not None
lanes = importlib.util.module_from_spec(_spec)
sys.modules["run_lanes"] = lanes
_spec.loader.exec_module(lanes)


def test_each_test_file_is_in_one_lane_and_the_last_checks_in_none() -> None:
    cmds = lanes.commands("python3", ["-q"])
    owners: dict[Path, list[str]] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        rel = path.relative_to(REPO)
        for name, cmd in cmds.items():
            selection = cmd[cmd.index("-q") + 1:]
            ignored = [a.removeprefix("--ignore=") for a in selection if a.startswith("--ignore=")]
            chosen = [a for a in selection if not a.startswith("-")]
            inside = any(rel.is_relative_to(c) for c in chosen)
            if inside and not any(rel.is_relative_to(i) for i in ignored):
                owners.setdefault(rel, []).append(name)
    last = {Path(p) for p in lanes.LAST}
    assert {p: o for p, o in owners.items() if len(o) != 1 and p not in last} == {}
    assert all(p not in owners for p in last)
    every = {p.relative_to(REPO) for p in (REPO / "tests").rglob("test_*.py")}
    assert every - set(owners) == last


def test_a_selection_runs_as_one_pytest() -> None:
    assert lanes.is_selection("tests/unit")
    assert lanes.is_selection("tests/unit/test_decide.py::test_skip")
    assert not lanes.is_selection("-q")
    assert not lanes.is_selection("no:cacheprovider")  # the value of -p, not a path
