"""README.md is a front door, docs/ the rooms behind it: README stays short, every link between
them resolves (the file, and the heading a `#anchor` names), and no subject goes missing when a
page is rewritten (each heading README and docs/ had when README was split is still somewhere).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 250

# Every subject README held before it was split into docs/ (its headings then), and the page of
# docs/ that holds it now: a page rewritten without one of them fails here.
SUBJECTS = {  # README's heading then -> (the page, its heading there now)
    "The two commands": ("README.md", "The two commands"),
    "What it changes on each runtime": ("docs/compatibility.md", "What it changes on each runtime"),
    "Under a real kubelet": ("docs/compatibility.md", "Under a real kubelet"),
    "On CRI-O": ("docs/compatibility.md", "On CRI-O"),
    "How it decides": ("docs/how-it-decides.md", "How it decides"),
    "Errors": ("docs/how-it-decides.md", "Errors"),
    "Configuration": ("docs/configuration.md", "Configuration"),
    "Operating it": ("docs/cli.md", "Operating it"),
    "Metrics": ("docs/monitoring.md", "Metrics"),
    "Alerts and runbooks": ("docs/monitoring.md", "Alerts and runbooks"),
    "Already stuck?": ("docs/troubleshooting.md", "Already stuck?"),
    "Releasing a sandbox whose DEL keeps failing": (
        "docs/troubleshooting.md", "Releasing a sandbox whose DEL keeps failing"),
    "Deploy": ("docs/install.md", "Deploy"),
    "Node layouts": ("docs/install.md", "Node layouts"),
    "Behind multus": ("docs/multus-and-kube-ovn.md", "Behind multus and kube-ovn"),
    "Where it runs": ("docs/host-compatibility.md", "Where it runs"),
    "Performance": ("docs/performance.md", "Performance"),
    "Layout": ("docs/development.md", "Layout"),
    **{f"CniDelguard{name}": ("docs/runbooks.md", f"CniDelguard{name}") for name in (
        "PluginBroken", "NodeNotGuarded", "StrictDelStuck", "DeadlockBreaksRising", "Errors",
        "WrapContested", "ObserveWouldFree", "DelegateDelFailing", "DelegateSlow",
        "MetricsStale", "MetricsDown", "NodeWithoutTarget", "NoTargets", "FleetNotGuarded",
        "VersionSkew")},
}


def prose(text: str) -> str:
    """The text without its fenced code blocks (a `# comment` in a sh block is no heading)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def headings(text: str) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"^#{1,6} (.+)$", prose(text), re.M)]


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", prose(text))


def test_readme_is_a_front_door() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move details to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # a URL: not this repository's to check
        name, _, fragment = target.partition("#")
        file = (page.parent / name).resolve() if name else page
        if not file.exists():
            broken.append(f"{target}: no {file.relative_to(REPO)}")
        elif fragment and (file.suffix != ".md" or fragment not in
                           {anchor(h) for h in headings(file.read_text(encoding="utf-8"))}):
            broken.append(f"{target}: no heading #{fragment} in {file.relative_to(REPO)}")
    assert broken == []


@pytest.mark.parametrize(("where", "heading"), SUBJECTS.values(), ids=list(SUBJECTS))
def test_no_subject_is_lost(where: str, heading: str) -> None:
    assert heading in headings((REPO / where).read_text(encoding="utf-8")), (
        f"{where} has no heading {heading!r}: a subject README once had is gone")


def test_every_docs_page_is_linked_from_readme() -> None:
    linked = {link.partition("#")[0] for link in links((REPO / "README.md").read_text())}
    unlinked = [p.name for p in PAGES[1:] if f"docs/{p.name}" not in linked]
    assert unlinked == []
