"""The verdicts this build ships (verdicts.json beside this module): data, read as it is.

delguard_build/verdicts.py works each (runtime range, chain) out of the matrix of record when
tools/render.py renders the pages, and writes it with the ranges and chains it names. A
file that is not this document is a build that cannot assess (VerdictsError), never half one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

SCHEMA = 1
LISTS = ("versions", "stuckWithGuard", "freedByRelease", "stuckOnlyWithGuard", "lines", "said")
_NUMBERS = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


class VerdictsError(ValueError):
    """The shipped verdicts are not the document this build writes."""


def parse_version(version: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a version as a runtime reports it ("v1.7.23-k3s1", "1.6.20~ds1");
    None when it has no three numbers, and is then in no range."""
    found = _NUMBERS.match(version.strip())
    return None if found is None else (int(found[1]), int(found[2]), int(found[3]))


@dataclass(frozen=True)
class Range:
    """Runtime versions claimed to behave alike: spans [low, high) of [major, minor, patch],
    `high` None open."""

    name: str
    runtime: str  # the matrix's runtime name
    label: str
    why: str  # what sets it apart (assess says it)
    spans: list[list[list[int] | None]]

    def holds(self, runtime: str, version: str) -> bool:
        number = parse_version(version)
        return runtime == self.runtime and number is not None and any(
            low <= list(number) and (high is None or list(number) < high)
            for low, high in self.spans if low is not None)


@dataclass(frozen=True)
class Chain:
    """A chain the matrix ran, as the shipped file names it."""

    name: str
    label: str
    multus: str | None
    stand_in: bool


@dataclass(frozen=True)
class Shipped:
    commit: str
    short_commit: str  # as a page shows it
    date: str
    ranges: tuple[Range, ...]
    chains: dict[str, Chain]
    verdicts: dict[str, dict[str, dict[str, Any]]]  # range name -> chain name -> verdict

    def range_of(self, runtime: str, version: str) -> Range | None:
        return next((r for r in self.ranges if r.holds(runtime, version)), None)

    def of(self, range_name: str, chain: str) -> dict[str, Any] | None:
        """The verdict of `chain` in the range; None where the matrix has no row of it."""
        return self.verdicts.get(range_name, {}).get(chain)


def parse(doc: Any) -> Shipped:
    try:
        run, ranges = doc["matrix"], tuple(Range(**r) for r in doc["ranges"])
        chains = {name: Chain(name, c["label"], c["multus"], c["standIn"])
                  for name, c in doc["chains"].items()}
        ok = doc["schema"] == SCHEMA and all(
            name in chains and all(isinstance(v[k], list) for k in LISTS)
            for by_chain in doc["verdicts"].values() for name, v in by_chain.items())
        if ok:
            return Shipped(run["commit"], run["shortCommit"], run["date"], ranges, chains,
                           doc["verdicts"])
    except (KeyError, TypeError, AttributeError):
        pass
    raise VerdictsError(f"verdicts.json: not the schema {SCHEMA} document this build writes")


def shipped() -> Shipped:
    """The file in the package (and in the frozen bundle, as data)."""
    from importlib import resources

    text = resources.files(__package__).joinpath("verdicts.json").read_text("utf-8")
    return parse(json.loads(text))
