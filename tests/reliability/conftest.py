"""Fixtures of the reliability suite, and the figures it prints at the end (docs/RELIABILITY.md).

Each test may record figures (counts, errors, peak RSS, timings) with the `figures` fixture; they
are printed in a "reliability figures" section and, when RELIABILITY_FIGURES names a file, written
there as JSON so the document can quote the numbers of an actual run.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.harness import Bench
from tests.support.guard import frozen_binary, under_test

FIGURES = pytest.StashKey[dict[str, dict[str, Any]]]()


class Figures:
    def __init__(self, store: dict[str, dict[str, Any]], test: str) -> None:
        self.store = store
        self.test = test

    def add(self, name: str, **values: Any) -> None:
        self.store[f"{self.test} :: {name}"] = values


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    return Figures(request.config.stash[FIGURES], request.node.name)


@pytest.fixture(scope="package", autouse=True)
def private_frozen_copy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Run a private copy of the frozen bundle: a rebuild of dist/ while this suite runs (other
    work in the same tree) must not swap the binary under a storm. Same bytes, other folder."""
    if under_test() != "frozen" or "DELGUARD_BIN" in os.environ:
        yield
        return
    source = frozen_binary().resolve().parent
    copy = tmp_path_factory.mktemp("frozen") / source.name
    shutil.copytree(source, copy, symlinks=True)
    os.environ["DELGUARD_BIN"] = str(copy / frozen_binary().name)
    try:
        yield
    finally:
        del os.environ["DELGUARD_BIN"]


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    """A fresh bench (the host's default dirs are checked for every test: tests/conftest.py)."""
    made = Bench(tmp_path / "bench")
    try:
        yield made
    finally:
        made.cleanup()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[FIGURES] = {}


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    figures = terminalreporter.config.stash.get(FIGURES, {})
    if not figures:
        return
    tr = terminalreporter
    tr.section(f"reliability figures (guard under test: {under_test()})")
    for name, values in sorted(figures.items()):
        tr.write_line(f"{name}: " + ", ".join(f"{k}={v}" for k, v in values.items()))
    target = os.environ.get("RELIABILITY_FIGURES")
    if target:
        payload = {"guard": under_test(), "figures": figures}
        Path(target).write_text(json.dumps(payload, indent=1, sort_keys=True), encoding="utf-8")
