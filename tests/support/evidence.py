"""What one end-to-end run saw (its verdict, its counts, the runtime's words) and the matrix row
it records: the suites' one record of a run, kept as JSON beside the matrix for the report."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

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
        where = matrix.path().parent / kept
        where.mkdir(parents=True, exist_ok=True)
        guard = "guard" if self.guard else "control"
        path = where / f"{self.scenario}-{self.runtime}-{self.delegate}-{guard}.json"
        path.write_text(json.dumps(asdict(self), indent=1) + "\n", encoding="utf-8")
        return path
