"""delguard_build/ranges.py: which range holds a runtime's version, as it reports it."""

from __future__ import annotations

import pytest

from delguard_build import ranges


@pytest.mark.parametrize(
    ("runtime", "version", "expected"),
    [
        pytest.param("containerd", "1.6.20~ds1", "containerd-before-boundary", id="debian-1.6.20"),
        pytest.param("containerd", "v1.6.36", "containerd-before-boundary", id="1.6.36"),
        pytest.param("containerd", "v1.6.37", "containerd-after-boundary", id="1.6.37"),
        pytest.param("containerd", "v1.6.38", "containerd-after-boundary", id="1.6.38"),
        pytest.param("containerd", "v1.7.0", "containerd-before-boundary", id="1.7.0"),
        pytest.param("containerd", "v1.7.22", "containerd-before-boundary", id="1.7.22"),
        pytest.param("containerd", "v1.7.23-k3s2", "containerd-after-boundary", id="k3s-1.7.23"),
        pytest.param("containerd", "v1.7.35", "containerd-after-boundary", id="1.7.35"),
        pytest.param("containerd", "v2.0.0", "containerd-after-boundary", id="2.0.0"),
        pytest.param("containerd", "2.1.6", "containerd-after-boundary", id="2.1.6-no-v"),
        pytest.param("containerd", "v1.5.18", "containerd-before-boundary", id="1.5"),
        pytest.param("cri-o", "1.36.3", "cri-o", id="cri-o"),
        pytest.param("cri-o", "v1.28.1", "cri-o", id="cri-o-v"),
        pytest.param("containerd", "1.7", None, id="two-numbers"),
        pytest.param("containerd", "main", None, id="no-number"),
        pytest.param("docker", "v24.0.0", None, id="another-runtime"),
    ],
)
def test_range_of(runtime: str, version: str, expected: str | None) -> None:
    found = ranges.of(runtime, version)
    assert (found.name if found else None) == expected


def test_containerd_ranges_do_not_overlap_and_leave_no_gap() -> None:
    """Every containerd version from 1.0.0 to 3.0.0 is in exactly one range."""
    for major, minor, patch in ((a, b, c) for a in (1, 2) for b in range(10) for c in range(60)):
        version = f"{major}.{minor}.{patch}"
        held = [r.name for r in ranges.RANGES if r.holds("containerd", version)]
        assert len(held) == 1, (version, held)
