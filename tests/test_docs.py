"""README.md is a front door, docs/ the rooms behind it: README stays short and the whole set
within its word budget, every link between them resolves (the file, and the heading a `#anchor`
names), no subject goes missing when a page is rewritten (each heading README and docs/ had when
README was split is still somewhere), and nothing a page names is missing from the code: a flag
of `cni-delguard` (read from its argparse parsers at test time, so a rename fails here), a guard
config key (the pydantic model's), a chart value (values.yaml's), a path under the repository, a
`tools/...` command and its flags, a `python -m` module. The keys table of docs/configuration.md
is the render of the config model (tools/render.py, checked by tests/test_render.py).
"""

from __future__ import annotations

import argparse
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cni_delguard import cli
from cni_delguard.guard import models

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 200
WORDS_MAX = 20_000  # README.md and docs/*.md together, as `wc -w` counts them

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
    "Already stuck?": ("docs/runbooks.md", "Already stuck?"),
    "Releasing a sandbox whose DEL keeps failing": (
        "docs/runbooks.md", "Releasing a sandbox whose DEL keeps failing"),
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

# Flags the pages give to programs other than cni-delguard, and whose they are: a flag in a page
# is cni-delguard's (and then its parser must have it) unless it is listed here.
OTHER_FLAGS = {
    "helm": {"--set", "--reuse-values", "--version", "--dry-run", "--namespace"},
    "kubectl": {"--field-selector", "--overwrite", "--image", "--rm", "--restart", "--overrides",
                "--output"},
    "buildah": {"--all", "--digestfile"},
    "k3s": {"--flannel-backend", "--data-dir"},
    "kubelet": {"--cni-conf-dir"},
    "nsenter and unshare": {"--pid", "--fork"},
    "pip": {"--require-hashes"},
    "journalctl and systemd-run": {"--full-time", "--collector", "--comment", "--idle"},
    "the bundle's loader (ld.so)": {"--library-path", "--inhibit-cache"},
    "pytest": {"--duration"},
    "ovs-vsctl": {"--timeout"},
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


def test_the_pages_keep_to_their_word_budget() -> None:
    words = {p.name: len(p.read_text(encoding="utf-8").split()) for p in PAGES}
    assert sum(words.values()) <= WORDS_MAX, (
        f"README.md and docs/ hold {sum(words.values())} words, over {WORDS_MAX}: say each fact "
        f"once and link to it ({sorted(words.items(), key=lambda kv: -kv[1])})")


# --- What the pages name, against the code -----------------------------------------------------

def _parsers() -> dict[str, set[str]]:
    """Each subcommand's long flags, and "" for the top level, from the CLI's own parsers."""
    parser = cli.build_parser(io.StringIO(), io.StringIO())
    flags = {"": {o for a in parser._actions for o in a.option_strings}}
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                flags[name] = {o for a in sub._actions for o in a.option_strings}
    return flags


def code(text: str) -> Iterator[str]:
    """Every piece of code a page shows: inline spans, and fenced lines (continuations joined)."""
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M):
        yield from block.replace("\\\n", " ").splitlines()
    yield from re.findall(r"`([^`\n]+)`", prose(text))


FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]")
COMMAND = re.compile(r"cni-delguard ([a-z]+)\b(.*)")


def _named_flags(page: Path) -> list[tuple[str, str]]:
    """(the cni-delguard subcommand or "", a flag) for every flag the page names: after
    `cni-delguard SUB` the flags up to the end of that command are SUB's."""
    found = []
    for snippet in code(page.read_text(encoding="utf-8")):
        before = snippet
        command = COMMAND.search(snippet)
        if command:
            args = re.split(r"[|;&]|\s#|\)", command.group(2))[0]
            found += [(command.group(1), f) for f in FLAG.findall(args)]
            before = snippet[:command.start()]
        found += [("", f) for f in FLAG.findall(before)]
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_flag_named_is_one_the_code_has(page: Path) -> None:
    parsers = _parsers()
    known = set().union(*parsers.values())
    others = set().union(*OTHER_FLAGS.values())
    tools = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "tools").iterdir()
                      if p.is_file())
    wrong = []
    for sub, flag in _named_flags(page):
        if sub in parsers and sub:
            if flag not in parsers[sub]:
                wrong.append(f"cni-delguard {sub} has no {flag}")
        elif flag not in known | others and flag not in tools:
            wrong.append(f"{flag}: no command of cni-delguard or tools/ has it")
    assert wrong == []


TOOL_COMMAND = re.compile(r"(?:^|[\s(])(tools/[\w.-]+)((?:\s+[^\s|;&#)]+)*)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_tools_command_exists_with_its_flags(page: Path) -> None:
    wrong = []
    for snippet in code(page.read_text(encoding="utf-8")):
        for tool, args in TOOL_COMMAND.findall(snippet):
            path = REPO / tool
            if not path.is_file():
                wrong.append(f"{tool}: no such tool")
                continue
            text = path.read_text(encoding="utf-8")
            wrong += [f"{tool} has no {f}" for f in FLAG.findall(args) if f not in text]
    assert wrong == []


TOP = ("cni_delguard", "tools", "tests", "docs", "installer", "charts", "packaging",
       "benchmarks", "peers", "conf", "demo")
REPO_PATH = re.compile(rf"(?<![\w/.-])((?:{'|'.join(TOP)})/[\w./*<>{{}}-]*)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_repository_path_named_exists(page: Path) -> None:
    missing = []
    for snippet in code(page.read_text(encoding="utf-8")):
        for named in REPO_PATH.findall(snippet):
            path = named.rstrip(".:,")
            if re.search(r"[<>{}]|\.\.\.", path):
                path = re.split(r"[<{]|\.\.\.", path)[0].rpartition("/")[0]  # up to a placeholder
            if path and not list(REPO.glob(path)):
                missing.append(named)
    assert missing == []


MODULE = re.compile(r"python3? -m ((?:benchmarks|cni_delguard|tools)(?:\.\w+)*)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_python_module_named_exists(page: Path) -> None:
    missing = []
    for snippet in code(page.read_text(encoding="utf-8")):
        for module in MODULE.findall(snippet):
            base = REPO / module.replace(".", "/")
            if not (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()):
                missing.append(module)
    assert missing == []


def _guard_keys() -> set[str]:
    keys = {f.alias or n for n, f in models.GuardConf.model_fields.items()}
    return keys | {f"timeouts.{f.alias or n}" for n, f in models.Timeouts.model_fields.items()}


def _values(tree: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield f"{prefix}{key}", value
            yield from _values(value, f"{prefix}{key}.")


def _chart_value_known(path: str, values: dict[str, Any]) -> bool:
    """The path is a value of the chart, or lies inside one that is a free map ({} by default)."""
    parts = path.split(".")
    return any(".".join(parts[:n]) in values and (n == len(parts) or values[".".join(parts[:n])]
                                                  == {}) for n in range(1, len(parts) + 1))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_config_key_and_chart_value_named_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    keys = _guard_keys()
    values = dict(_values(yaml.safe_load((REPO / "charts/cni-delguard/values.yaml").read_text())))
    wrong = []
    for snippet in code(text):
        for key in re.findall(r"\btimeouts\.\w+", snippet):
            if key not in keys:
                wrong.append(f"guard key {key}")
        for assignments in re.findall(r"--set(?:-string)?[ =](\S+)", snippet):
            for assignment in assignments.split(","):
                name = assignment.partition("=")[0]
                if not _chart_value_known(name, values):
                    wrong.append(f"chart value {name}")
    for conf in re.findall(r"^```json\n(.*?)^```", text, flags=re.S | re.M):
        for key in re.findall(r'"(\w+)":', conf.split('"delegate"')[0]):
            if '"cni-delguard"' in conf and key not in keys and key != "plugins":
                wrong.append(f"guard key {key} in a config")
    assert wrong == []


@pytest.mark.parametrize(("line", "expected"), [
    pytest.param("`cni-delguard doctor --root /host --json`",
                 [("doctor", "--root"), ("doctor", "--json")], id="inline-command"),
    pytest.param("```sh\nkubectl exec $POD -- cni-delguard stats --since 1h | head\n```",
                 [("stats", "--since")], id="after-kubectl-exec-up-to-a-pipe"),
    pytest.param("```sh\ncni-delguard assess --root /host \\\n    --runtime x\n```",
                 [("assess", "--root"), ("assess", "--runtime")], id="continued-line"),
    pytest.param("the `--watch-interval` flag", [("", "--watch-interval")], id="a-flag-alone"),
    pytest.param("```sh\nhelm upgrade x --set mode=enforce\n```", [("", "--set")], id="helm"),
])
def test_the_flags_a_page_names_are_found(tmp_path: Path, line: str,
                                          expected: list[tuple[str, str]]) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"# A page\n\n{line}\n", encoding="utf-8")
    assert _named_flags(page) == expected


def test_a_flag_the_parser_lacks_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("Run `cni-delguard doctor --rootfs /host`.\n", encoding="utf-8")
    (sub, flag), = _named_flags(page)
    assert flag not in _parsers()[sub]
