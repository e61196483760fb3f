"""Which -m expressions opt in to the integration suites (tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.conftest import asked_for


@pytest.mark.parametrize(
    ("markexpr", "opts_in"),
    [
        ("", False),
        ("integration", True),
        ("integration and not slow", True),
        ("netns", True),
        ("containerd", True),
        ("image or netns", True),
        ("slow", True),
        ("not integration", False),
        ("not slow", False),
        ("not netns and not image", False),
        ("integrations", False),
    ],
)
def test_a_marker_expression_opts_in_only_by_naming_an_integration_marker(markexpr, opts_in):
    assert asked_for(markexpr) is opts_in
