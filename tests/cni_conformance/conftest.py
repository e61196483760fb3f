"""Fixtures of the conformance suite and the scenario x spec-version matrix printed at the end.

Each test module names its scenario in a module constant SCENARIO; tests take the spec version
as the parameter `version`. Needs root (ip netns); skipped with the reason otherwise.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests.cni_conformance.lab import VERSIONS, Lab
from tests.support.cnitool import cnitool_binary, ensure_mount_point
from tests.support.guard import under_test
from tests.support.netns import NetnsSet, available

HERE = Path(__file__).resolve().parent
CELLS = pytest.StashKey[dict[str, tuple[str, str]]]()
RESULTS = pytest.StashKey[dict[tuple[str, str], list[str]]]()


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    reason = available()
    if reason:
        pytest.skip(reason)
    ensure_mount_point()
    tool = cnitool_binary()
    nets = NetnsSet(prefix="dgc")
    bench: Lab | None = None
    try:
        bench = Lab(tmp_path / "lab", nets, nets.new("o"), tool)
        yield bench
    finally:
        errors = bench.close() if bench else nets.close()
        assert not errors, f"namespaces left behind: {errors}"


# -- the matrix ---------------------------------------------------------------------------------
def pytest_configure(config: pytest.Config) -> None:
    config.stash[CELLS] = {}
    config.stash[RESULTS] = {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cells = config.stash[CELLS]
    for item in items:
        if HERE not in Path(str(item.path)).parents:
            continue
        scenario = getattr(getattr(item, "module", None), "SCENARIO", None)
        callspec = getattr(item, "callspec", None)
        version = callspec.params.get("version", "all") if callspec else "all"
        if scenario:
            cells[item.nodeid] = (scenario, str(version))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    cell = item.config.stash[CELLS].get(item.nodeid)
    if cell is not None:
        outcomes = item.config.stash[RESULTS].setdefault(cell, [])
        if report.failed:
            outcomes.append("FAIL")
        elif hasattr(report, "wasxfail"):
            outcomes.append("xfail" if report.skipped else "XPASS")
        elif report.skipped:
            outcomes.append("skip")
        elif report.when == "call":
            outcomes.append("pass")
    return report


def _cell_text(outcomes: list[str]) -> str:
    if not outcomes:
        return "-"
    for loud in ("FAIL", "XPASS", "xfail"):
        if loud in outcomes:
            return loud
    return "pass" if "pass" in outcomes else "skip"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    results = terminalreporter.config.stash[RESULTS]
    if not results:
        return
    scenarios = sorted({s for s, _ in results})
    versions = [v for v in [*VERSIONS, "all"] if any(v == cv for _, cv in results)]
    width = max(len(s) for s in scenarios)
    tr = terminalreporter
    tr.section(f"CNI conformance matrix (guard under test: {under_test()})")
    tr.write_line(" " * width + " | " + " | ".join(f"{v:>5}" for v in versions))
    for scenario in scenarios:
        cells = [_cell_text(results.get((scenario, v), [])) for v in versions]
        tr.write_line(f"{scenario:<{width}} | " + " | ".join(f"{c:>5}" for c in cells))
