"""Every file of the repository that is generated from code or data, and what each should hold:
the one list tools/render.py writes (--write) and checks (--check), by group.

    matrix  README.md's fixes table and docs/compatibility.md's tables (render.py) and the
            verdicts `cni-delguard assess` ships (verdicts.py), from the matrix of record
    rules   a kustomize overlay's prometheusrule.yaml, from its settings.yaml and the rules'
            template (rules.py); the repository's overlays/monitoring unless others are named
    keys    docs/configuration.md's keys table, from the config model (keys.py)

    outputs(repo, groups, overlays)   the files, each as (path, text now or None, text wanted)
    diff(output)                      what writing it would change, as a unified diff

The Helm chart's copies of the kustomize files are tools/generate-chart.py's (tools/render.py runs
it as the group `chart`), since tools/build-chart.sh checks them through it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml  # type: ignore[import-untyped]  # PyYAML ships no type hints; the tools need it

from delguard_build import keys, matrix, render, rules, verdicts

GROUPS = ("matrix", "rules", "keys")


class RenderError(ValueError):
    """A source the files cannot be rendered from (a page without its markers, bad settings)."""


@dataclass(frozen=True)
class Output:
    path: Path
    now: str | None  # None: the file does not exist yet
    wanted: str

    @property
    def stale(self) -> bool:
        return self.now != self.wanted


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _page(path: Path) -> str:
    text = _read(path)
    if text is None:
        raise RenderError(f"{path}: no such page")
    return text


def _matrix(repo: Path) -> Iterator[Output]:
    record = matrix.loads(_page(repo / matrix.RECORD))
    target = repo / verdicts.TARGET
    yield Output(target, _read(target), verdicts.dumps(record))
    pages: dict[str, list[render.Target]] = {}
    for t in render.TARGETS:
        pages.setdefault(t.page, []).append(t)
    for page, targets in pages.items():
        now = _page(repo / page)
        wanted = now
        try:
            for t in targets:
                wanted = render.rewritten(wanted, t, record)
        except render.MarkersError as exc:
            raise RenderError(str(exc)) from None
        yield Output(repo / page, now, wanted)


def _rules(repo: Path, overlays: Iterable[Path]) -> Iterator[Output]:
    template = _page(repo / rules.TEMPLATE)
    for directory in overlays:
        source = directory / "settings.yaml"
        try:
            settings = rules.settings_of(yaml.safe_load(_page(source)), str(source))
            wanted = rules.overlay(template, settings)
        except (yaml.YAMLError, rules.SettingsError) as exc:
            raise RenderError(str(exc)) from None
        target = directory / "prometheusrule.yaml"
        yield Output(target, _read(target), wanted)


def _keys(repo: Path) -> Iterator[Output]:
    page = repo / keys.PAGE
    now = _page(page)
    try:
        yield Output(page, now, keys.rendered(now))
    except keys.KeysError as exc:
        raise RenderError(str(exc)) from None


def outputs(repo: Path, groups: Iterable[str] = GROUPS,
            overlays: Iterable[Path] | None = None) -> list[Output]:
    """The files of the groups, in GROUPS' order; `overlays` replaces the repository's own."""
    chosen = set(groups)
    unknown = chosen - set(GROUPS)
    if unknown:
        raise RenderError(f"no group {sorted(unknown)}: the groups are {', '.join(GROUPS)}")
    found: list[Output] = []
    if "matrix" in chosen:
        found += _matrix(repo)
    if "rules" in chosen:
        found += _rules(repo, [repo / rules.OVERLAY] if overlays is None else overlays)
    if "keys" in chosen:
        found += _keys(repo)
    return found


def diff(output: Output, repo: Path | None = None) -> str:
    """What writing the output would change ("" when the file holds it)."""
    name = str(output.path.relative_to(repo)) if repo and output.path.is_relative_to(repo) \
        else str(output.path)
    return "".join(difflib.unified_diff((output.now or "").splitlines(keepends=True),
                                        output.wanted.splitlines(keepends=True),
                                        name, f"{name} (rendered)"))
