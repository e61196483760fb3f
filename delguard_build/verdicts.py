"""The verdicts `cni-delguard assess` ships: every (runtime range, chain) the matrix measured,
worked out here when the matrix is rendered, so that the product carries data and no derivation.

    build(m)      the document (a dict); dumps(m) its text, as the package holds it
    TARGET        where the package holds it (cni_delguard/ops/assess/verdicts.json)

The document, `schema` 1 (cni_delguard/ops/assess/verdicts.py reads it):

    {"schema": 1,
     "matrix": {"commit", "date", "rows"},            the run it comes from (rows: a count)
     "chains": {NAME: {"label", "multus", "standIn"}},
     "verdicts": {RANGE: {NAME: {"versions", "stuckWithout", "freed", "stuckWithGuard",
                                 "freedByRelease", "stuckOnlyWithGuard", "keptFromDelegate",
                                 "lines", "scenarios"}}}}

A range and chain without rows has no entry: assess says unmeasured. `lines` is verdict.lines()
(assess prints them as they are), `scenarios` each scenario's effect and runs (assess's JSON).
"""

from __future__ import annotations

import json
from typing import Any

from cni_delguard.ops.assess import ranges
from delguard_build import chains, matrix, verdict

SCHEMA = 1
TARGET = "cni_delguard/ops/assess/verdicts.json"  # relative to the repository


def entry(v: verdict.Verdict) -> dict[str, Any]:
    return {
        "versions": list(v.versions),
        "stuckWithout": v.stuck_without,
        "freed": v.named(verdict.FREED),
        "stuckWithGuard": v.named(verdict.STUCK),
        "freedByRelease": v.named(verdict.RELEASE),
        "stuckOnlyWithGuard": v.named(verdict.WORSE),
        "keptFromDelegate": v.kept,
        "lines": verdict.lines(v),
        "scenarios": [{"scenario": s.name, "effect": s.effect, "runs": [
            {"version": p.version, "driver": p.driver, "without": p.without,
             "with": p.with_guard, "kept": p.kept} for p in s.pairs]} for s in v.scenarios],
    }


def build(m: matrix.Matrix) -> dict[str, Any]:
    found: dict[str, dict[str, Any]] = {}
    for where in ranges.RANGES:
        for name in chains.CHAINS:
            v = verdict.verdict(m.rows, where, name)
            if v.measured:
                found.setdefault(where.name, {})[name] = entry(v)
    return {
        "schema": SCHEMA,
        "matrix": {"commit": m.commit, "date": m.date, "rows": len(m.rows)},
        "chains": {c.name: {"label": c.label, "multus": c.multus, "standIn": c.stand_in}
                   for c in chains.CHAINS.values()},
        "verdicts": found,
    }


def dumps(m: matrix.Matrix) -> str:
    """One line per verdict: small, and a change to the matrix shows as a readable diff."""
    doc = build(m)
    head = {k: doc[k] for k in ("schema", "matrix", "chains")}
    lines = [json.dumps(head, ensure_ascii=False)[:-1] + ', "verdicts": {']
    ranges_ = []
    for where, by_chain in doc["verdicts"].items():
        inner = ",\n".join(f"  {json.dumps(name)}: {json.dumps(e, ensure_ascii=False)}"
                           for name, e in by_chain.items())
        ranges_.append(f" {json.dumps(where)}: {{\n{inner}\n }}")
    lines.append(",\n".join(ranges_))
    lines.append("}}")
    return "\n".join(lines) + "\n"
