"""What a bare `python3 -m pytest` runs: the fast, rootless tests; the integration suites opt in.
And, for every test of every suite, the guard's default dirs on the host left alone
(tests/support/hostdefaults.py): as root the session runs in a mount namespace of its own with
tmpfs over /var/log and /var/lib/cni, and each test checks what is inside the host's
/var/lib/cni/delguard and /var/log/cni-delguard before and after.

The integration suites start containerd, mount tmpfs, make network namespaces, run cnitool, storm
the guard, build images or run a Prometheus server: minutes, root, and changes to the host's
namespaces. Their tests get the `integration` marker here (by directory, or by a marker that
needs root) and are skipped unless DELGUARD_INTEGRATION=1 (tools/test.sh sets it, so .ci/run runs
everything) or the `-m` expression asks for them by name (e.g. `-m integration`,
`-m "integration and not slow"`, `-m netns`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import hostdefaults

HERE = Path(__file__).resolve().parent
INTEGRATION_DIRS = tuple(
    HERE / d
    for d in (
        "cni_conformance", "reliability", "e2e_cri", "e2e_kubelet", "node_roots",
        "monitoring", "multus_chain", "e2e_cluster",
    )
)
# Markers that by themselves mean root and the host's namespaces, wherever the test lives.
ROOT_MARKERS = ("netns", "containerd", "image", "build")
OPT_IN = (
    "integration suite: set DELGUARD_INTEGRATION=1 (tools/test.sh does) or select it with "
    "-m integration"
)


def is_integration(item: pytest.Item) -> bool:
    path = Path(str(item.path))
    in_suite = any(d in path.parents for d in INTEGRATION_DIRS)
    return in_suite or any(item.get_closest_marker(m) for m in ROOT_MARKERS)


def asked_for(markexpr: str) -> bool:
    """Whether a -m expression names an integration marker other than after `not`."""
    words = re.findall(r"[\w-]+", markexpr)
    names = ("integration", *ROOT_MARKERS, "slow")
    return any(w in names and (i == 0 or words[i - 1] != "not") for i, w in enumerate(words))


def opted_in(config: pytest.Config) -> bool:
    return os.environ.get("DELGUARD_INTEGRATION") == "1" or asked_for(config.option.markexpr)


# Tests that read what the rest of the session wrote: README's runtime table is checked against
# .cache/e2e/matrix.json, which the e2e suites fill as they run, so in a whole run (tools/test.sh,
# CI) it must come after them to check this run's matrix and not the last one's. pytest runs
# items in collection order (tests/test_*.py before tests/unit, say), hence this explicit move.
RUN_LAST = (HERE / "test_readme_matrix.py",)


@pytest.hookimpl(tryfirst=True)  # before -m deselects: `-m integration` must see the marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = None if opted_in(config) else pytest.mark.skip(reason=OPT_IN)
    for item in items:
        if is_integration(item):
            item.add_marker(pytest.mark.integration)
            if skip is not None:
                item.add_marker(skip)
    items.sort(key=lambda item: Path(str(item.path)) in RUN_LAST)  # stable: the rest keep order


def pytest_report_header(config: pytest.Config) -> list[str]:
    suites = (
        "integration suites: included"
        if opted_in(config)
        else "integration suites: skipped (DELGUARD_INTEGRATION=1 or -m integration to run them)"
    )
    return [suites, f"the guard's host defaults: {hostdefaults.isolate()}"]


def pytest_configure(config: pytest.Config) -> None:
    """Before any test (and before collection imports a test module): out of the host's mount
    namespace, so no test can write the guard's default dirs there."""
    hostdefaults.isolate()


@pytest.fixture(autouse=True)
def host_defaults_untouched() -> Iterator[None]:
    """What is inside the guard's default dirs on the host is the same after the test."""
    before = hostdefaults.snapshot()
    yield
    after = hostdefaults.snapshot()
    assert after == before, "the test changed the guard's default dirs on the host:\n" + "\n".join(
        hostdefaults.changes(before, after)
    )
