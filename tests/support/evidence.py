"""What one end-to-end run saw (its verdict, its counts, the runtime's words) and the matrix row
it records: the suites' one record of a run, kept as JSON beside the matrix for the report.
`Evidence` is a run the CRI client drove, `KubeletEvidence` one a kubelet drove (standalone, or
registered to a cluster's API server: the suite says which)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from tests.support import matrix


@dataclass
class Evidence:
    """One run of a scenario on one runtime, with or without the guard."""

    scenario: str
    runtime: str  # the row's key (containerd-2.1, ...)
    version: str  # as the runtime's binary reports it
    delegate: str  # the matrix's delegate name
    guard: bool
    driver: str = "cri"  # who drove the runtime: the CRI client, or "kubelet"
    kubernetes: str | None = None  # the kubelet's release, where a kubelet drove it
    outcome: str = ""  # one of matrix.py's outcomes
    seconds: float = 0.0  # from the disruption until the pod (every pod) runs again
    multus_dels: int = 0  # DELs that reached multus's daemon
    kube_ovn_dels: int = 0  # DELs that reached kube-ovn's daemon
    facts: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # the runtime's (kubelet's) errors, in order
    tally: dict[str, int] = field(default_factory=dict)  # those errors, by kind

    def record(self, kind: str) -> None:
        """Its row in the matrix (`kind`: the runtime's name, containerd or cri-o)."""
        matrix.record(matrix.Row(kind, self.version, self.delegate, self.scenario, self.guard,
                                 self.outcome, self.seconds, driver=self.driver,
                                 kubernetes=self.kubernetes))

    def save(self, kept: str = "reported") -> Path:
        """Kept beside the matrix, under `kept`, for the report's quotes."""
        guard = "guard" if self.guard else "control"
        return keep(kept, f"{self.scenario}-{self.runtime}-{self.delegate}-{guard}", asdict(self))


QUOTE = 700  # characters of a quoted log line


def quote(lines: list[str], most: int = 2) -> list[str]:
    """The first `most` lines, each cut to QUOTE characters: what a report quotes."""
    return [line[:QUOTE] for line in lines[:most]]


def keep(kept: str, name: str, data: dict[str, Any]) -> Path:
    """A run's evidence kept beside the matrix, under `kept`, as <name>.json."""
    where = matrix.path().parent / kept
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{name}.json"
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return path


@dataclass
class KubeletEvidence:
    """One run of a scenario on a node a kubelet drives: its verdict and the facts the tests
    check and the report quotes. A suite sets `chain` (the matrix's name of its chain), `driver`
    (the matrix's) and `kept` (where its runs are kept)."""

    scenario: str
    runtime: str
    version: str
    guard: bool
    outcome: str = ""
    seconds: float = 0.0
    dels: int = 0  # DELs the delegate saw for the subject sandboxes
    gc_failures: int = 0  # the kubelet GC's failed attempts on them
    kubelet: list[str] = field(default_factory=list)  # its own lines, quoted
    containerd: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    kubernetes: str = ""  # the kubelet's release; "" for the suite's own, `release`

    chain: ClassVar[str]
    release: ClassVar[str]  # the Kubernetes release the suite's runs take unless told
    driver: ClassVar[str] = "kubelet"
    kept: ClassVar[str] = "kubelet"

    def record(self, scenario: str, guard: bool | None = None, outcome: str | None = None,
               seconds: float | None = None) -> None:
        """A matrix row of `scenario`: this run's guard, outcome and seconds unless given."""
        row = matrix.Row(runtime="containerd", version=self.version, chain=self.chain,
                         scenario=scenario, guard=self.guard if guard is None else guard,
                         outcome=self.outcome if outcome is None else outcome,
                         seconds=self.seconds if seconds is None else seconds,
                         driver=self.driver, kubernetes=self.kubernetes or self.release)
        matrix.record(row)
        self.rows.append(asdict(row))

    def save(self) -> Path:
        """Kept beside the matrix, for the report's quotes."""
        guard = "guard" if self.guard else "control"
        minor = "" if self.kubernetes in ("", self.release) else f"-{self.kubernetes}"
        return keep(self.kept, f"{self.scenario}-{self.runtime}-{guard}{minor}", asdict(self))
