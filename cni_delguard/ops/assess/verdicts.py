"""The verdicts this build ships (verdicts.json beside this module): data, read as it is.

delguard_build/verdicts.py works each (runtime range, chain) out of the matrix of record when
tools/render-matrix.py renders the pages, and writes this file; assess only looks a verdict up.
Its shape is checked as far as assess reads it: a file that is not this document is a build
that cannot assess (VerdictsError), never a half answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SCHEMA = 1
NAME = "verdicts.json"
# What a verdict holds that the text and summary read (the JSON passes the rest through).
LISTS = ("versions", "stuckWithout", "freed", "stuckWithGuard", "freedByRelease",
         "stuckOnlyWithGuard", "lines")


class VerdictsError(ValueError):
    """The shipped verdicts are not the document this build writes."""


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
    date: str
    chains: dict[str, Chain]
    verdicts: dict[str, dict[str, dict[str, Any]]]  # range name -> chain name -> verdict

    @property
    def short_commit(self) -> str:
        """The commit as a page shows it: 12 hex digits, "+dirty" kept."""
        head, dirty, tail = self.commit.partition("+")
        if len(head) >= 12 and all(c in "0123456789abcdef" for c in head):
            return head[:12] + dirty + tail
        return self.commit

    def of(self, range_name: str, chain: str) -> dict[str, Any] | None:
        """The verdict of `chain` in the range; None where the matrix has no row of it."""
        return self.verdicts.get(range_name, {}).get(chain)


def parse(doc: object) -> Shipped:
    try:
        if not isinstance(doc, dict) or doc["schema"] != SCHEMA:
            raise VerdictsError(f"{NAME}: not schema {SCHEMA}")
        run = doc["matrix"]
        chains = {name: Chain(name, str(c["label"]), c["multus"], bool(c["standIn"]))
                  for name, c in doc["chains"].items()}
        verdicts = doc["verdicts"]
        for by_chain in verdicts.values():
            for name, v in by_chain.items():
                if name not in chains or not all(isinstance(v[k], list) for k in LISTS):
                    raise VerdictsError(f"{NAME}: the verdict of {name!r} is not one")
        return Shipped(str(run["commit"]), str(run["date"]), chains, verdicts)
    except (KeyError, TypeError, AttributeError) as exc:
        raise VerdictsError(f"{NAME}: not the document this build writes ({exc!r})") from None


def shipped() -> Shipped:
    """The file in the package (and in the frozen bundle, as data)."""
    from importlib import resources

    text = resources.files(__name__.rpartition(".")[0]).joinpath(NAME).read_text("utf-8")
    try:
        return parse(json.loads(text))
    except ValueError as exc:
        if isinstance(exc, VerdictsError):
            raise
        raise VerdictsError(f"{NAME}: not JSON: {exc}") from None
