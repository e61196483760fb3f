"""What the node-root suites share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import guard, staticfake
from tests.support.fakenode import FAKE_DIR, Node
from tests.support.noderoot import needs_root, proc_mounted


@pytest.fixture(scope="session")
def static_fake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The static fake delegate (tests/fakes/static_delegate), built once: copy it into a root."""
    return staticfake.build(tmp_path_factory.mktemp("static-fake") / "static-fake")


@pytest.fixture
def fake_node(tmp_path: Path, static_fake: Path) -> Iterator[Node]:
    needs_root()
    guard.frozen_or_skip()
    made = Node(tmp_path / "node", static_fake)
    for d in ("/var/log", FAKE_DIR):
        made.path(d).mkdir(parents=True)
    with proc_mounted(made.root):
        yield made
