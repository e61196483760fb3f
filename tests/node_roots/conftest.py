"""What the node-root suites share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import staticfake


@pytest.fixture(scope="session")
def static_fake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The static fake delegate (tests/fakes/static_delegate), built once: copy it into a root."""
    return staticfake.build(tmp_path_factory.mktemp("static-fake") / "static-fake")
