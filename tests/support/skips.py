"""The one rule for a test whose parts are missing here: skipped in the quick loop, a failure
under CI (CI set), where tools/test.sh has installed and built everything first (the Debian
packages, the peers of peers/pins.tsv, the frozen bundles)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def skip_or_fail(why: str, suite: str | None = None) -> NoReturn:
    """Skip, saying `why` (and which `suite`, e.g. "CRI e2e"); under CI, fail instead."""
    if os.environ.get("CI"):
        pytest.fail(f"{suite or 'this test'} cannot run in CI: {why} "
                    "(tools/test.sh installs and builds everything first)")
    pytest.skip(f"SKIPPED {suite}: {why}" if suite else why)
