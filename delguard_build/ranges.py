"""Runtime version ranges: versions that are claimed to behave alike, one row each (pure).

The boundary that decides most of the matrix is containerd's: since 1.6.37, 1.7.23 and 2.0
StopPodSandbox runs no CNI DEL for a sandbox without a recorded CNI result (its ADD never
completed): upstream commits ca6516ee8 (1.6), 278bd0f72 (1.7), b7b6b324b (2.0), October 2024.
Below it every stale sandbox goes through DEL. The ranges are read from those commits; what each
range does is only what the matrix measured on the versions in it (verdict.py says which).
verdicts.py ships them to `cni-delguard assess`, which places a node's version with them.
CRI-O has no such boundary known: one range, its cells name the versions measured.

A span is [low, high): `high` None is open. Versions are compared on their first three numbers
("v1.7.23-k3s1" and "1.6.20~ds1" included), as assess compares them (parse_version); one
without three numbers is in no range.
"""

from __future__ import annotations

from dataclasses import dataclass

from cni_delguard.ops.assess.verdicts import parse_version

Version = tuple[int, int, int]


@dataclass(frozen=True)
class Range:
    name: str  # the key assess's JSON and the README table use
    runtime: str  # the matrix's runtime name
    label: str  # as a table's row says it
    spans: tuple[tuple[Version, Version | None], ...]
    why: str = ""  # what sets it apart, from the upstream source (assess says it)

    def holds(self, runtime: str, version: str) -> bool:
        number = parse_version(version)
        if runtime != self.runtime or number is None:
            return False
        return any(low <= number and (high is None or number < high) for low, high in self.spans)


RANGES: tuple[Range, ...] = (
    Range("containerd-before-boundary", "containerd",
          "containerd below 1.6.37, 1.7.0 to 1.7.22",
          (((0, 0, 0), (1, 6, 37)), ((1, 7, 0), (1, 7, 23))),
          "every stale sandbox still goes through DEL"),
    Range("containerd-after-boundary", "containerd", "containerd 1.6.37+, 1.7.23+, 2.x",
          (((1, 6, 37), (1, 7, 0)), ((1, 7, 23), None)),
          "no DEL for a sandbox whose ADD never completed"),
    Range("cri-o", "cri-o", "CRI-O", (((0, 0, 0), None),)),
)
BY_NAME = {r.name: r for r in RANGES}

parse = parse_version


def of(runtime: str, version: str) -> Range | None:
    """The range a runtime's version is in (None: no range holds it)."""
    return next((r for r in RANGES if r.holds(runtime, version)), None)


def sort_key(version: str) -> tuple[int, ...]:
    return parse(version) or (0, 0, 0)
