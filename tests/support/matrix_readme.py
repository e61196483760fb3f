"""docs/compatibility.md's per-runtime tables, rendered from the matrix (support/matrix.py).

The tables sit in docs/compatibility.md between BEGIN and END. One table per chain and driver: a
row per scenario (the matrix's order), a column per runtime and version (as the binary reported
it), and in each cell the outcome without the guard, then with it; an outcome the guard changes
is bold. Seconds are not rendered: they differ from run to run, outcomes must not.
tools/render-matrix.py writes or checks the page with it; tests/test_readme_matrix.py fails when
the two disagree.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from pathlib import Path

from tests.support import matrix

README = matrix.REPO / "docs" / "compatibility.md"  # the page the tables live on
BEGIN = ("<!-- matrix:begin (tools/render-matrix.py --write renders this from "
         ".cache/e2e/matrix.json) -->")
END = "<!-- matrix:end -->"
RUNTIME_NAMES = {"containerd": "containerd", "cri-o": "CRI-O"}
DRIVER_NAMES = {"cri": "CRI calls written by the test", "kubelet": "a real kubelet"}
DELEGATE_NAMES = {
    "fake-stateful": "a delegate that fails DEL once it holds no state",
    "multus-thin": "real multus thin, kube-ovn's conflist inline in `delegates`",
    "multus-thin-path": "real multus thin, kube-ovn's conflist by its path in `clusterNetwork`",
    "multus-thick": "real multus-shim and multus-daemon",
    "multus-thick-auto": "real multus v4.3.0 thick, `multusConfigFile: auto`, before the real "
    "kube-ovn CNI and portmap, its daemon limited to 100m CPU",
    "multus-thick-auto-v4.2.3": "real multus v4.2.3 thick (Cozystack 1.2.0's), `multusConfigFile: "
    "auto`, before the real kube-ovn CNI and portmap, its daemon limited to 100m CPU",
}
MISSING = "-"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version.split("~", maxsplit=1)[0])[:3])


def _cell(without: str | None, with_guard: str | None) -> str:
    if with_guard is not None and without is not None and with_guard != without:
        return f"{without} → **{with_guard}**"
    return f"{without or MISSING} → {with_guard or MISSING}"


def _table(rows: list[matrix.Row]) -> list[str]:
    columns = sorted({(r.runtime, r.version) for r in rows},
                     key=lambda c: (matrix.RUNTIMES.index(c[0]), _version_key(c[1])))
    outcome = {(r.runtime, r.version, r.scenario, r.guard): r.outcome for r in rows}
    head = ["scenario", *(f"{RUNTIME_NAMES[rt]} {v}" for rt, v in columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for scenario in matrix.SCENARIOS:
        if not any(r.scenario == scenario for r in rows):
            continue
        cells = [_cell(outcome.get((rt, v, scenario, False)), outcome.get((rt, v, scenario, True)))
                 for rt, v in columns]
        lines.append("| " + " | ".join([scenario, *cells]) + " |")
    return lines


def render(rows: Iterable[matrix.Row]) -> str:
    """The text between BEGIN and END (without them) for these rows."""
    rows = list(rows)
    groups = sorted({(r.delegate, r.driver) for r in rows},
                    key=lambda g: (matrix.DELEGATES.index(g[0]), matrix.DRIVERS.index(g[1])))
    if not groups:
        return "No matrix has been recorded yet.\n"
    out: list[str] = []
    for delegate, driver in groups:
        out.append(f"`{delegate}` ({DELEGATE_NAMES[delegate]}) behind the guard, driven by "
                   f"{DRIVER_NAMES[driver]} (without the guard → with it):")
        out.append("")
        out.extend(_table([r for r in rows if (r.delegate, r.driver) == (delegate, driver)]))
        out.append("")
    return "\n".join(out)


def split(readme: str) -> tuple[str, str, str]:
    """The page as (before BEGIN, between, from END on); ValueError without the markers."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the page has no {BEGIN!r} ... {END!r} section")
    body_from = start + len(BEGIN)
    return readme[:body_from], readme[body_from:end], readme[end:]


def rewritten(readme: str, rows: Iterable[matrix.Row]) -> str:
    before, _, after = split(readme)
    return f"{before}\n{render(rows)}{after}"


def diff(readme: str, rows: Iterable[matrix.Row]) -> str:
    """What --write would change in the page ("" when it agrees with the rows)."""
    new = rewritten(readme, rows)
    return "".join(difflib.unified_diff(readme.splitlines(keepends=True),
                                        new.splitlines(keepends=True), "docs/compatibility.md",
                                        "docs/compatibility.md (from the matrix)"))


def readme_path() -> Path:
    return README
