"""The verdicts `cni-delguard assess` ships: every (runtime range, chain) the matrix measured,
worked out here when the matrix is rendered, so that the product carries data and no derivation.

    build(m)      the document (a dict); dumps(m) its text, as the package holds it
    TARGET        where the package holds it (cni_delguard/ops/assess/verdicts.json)

The document, `schema` 1 (cni_delguard/ops/assess/verdicts.py reads it):

    {"schema": 1,
     "matrix": {"commit", "shortCommit", "date", "rows"},   the run it comes from
     "ranges": [{"name", "runtime", "label", "why", "spans": [[LOW, HIGH or null], ...]}],
     "chains": {NAME: {"label", "multus", "standIn"}},
     "verdicts": {RANGE: {NAME: {"versions", "stuckWithout", "freed", "stuckWithGuard",
                                 "freedByRelease", "stuckOnlyWithGuard", "keptFromDelegate",
                                 "lines", "said", "scenarios"}}}}

A range and chain without rows has no entry: assess says unmeasured. `lines` is verdict.lines()
and `said` the clauses of assess's one-line summary (it prints both as they are), `scenarios`
each scenario's effect and runs (assess's JSON).
"""

from __future__ import annotations

import json
from typing import Any

from delguard_build import chains, matrix, ranges, verdict

SCHEMA = 1
TARGET = "cni_delguard/ops/assess/verdicts.json"  # relative to the repository


def said(v: verdict.Verdict) -> list[str]:
    """What assess's summary says of a verdict: stuck without, freed, stuck with it too (and
    whether the release valve was measured to free it), the DELs kept from the delegate."""
    out = [f"stuck without the guard: {', '.join(v.stuck_without) or 'nothing measured'}",
           f"the guard frees: {', '.join(v.named(verdict.FREED)) or 'nothing'}"]
    if held := v.named(verdict.STUCK, verdict.WORSE):
        valve = ("`cni-delguard release` frees such a sandbox: measured"
                 if v.named(verdict.RELEASE) else "the release valve: `cni-delguard release`")
        out.append(f"stuck with it too: {', '.join(held)} ({valve})")
    if v.kept:
        out.append(f"it keeps DELs from the delegate in: {', '.join(v.kept)}")
    return out


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
        "said": said(v),
        "scenarios": [{"scenario": s.name, "effect": s.effect, "runs": [
            {"version": p.version, "driver": p.driver, "without": p.without,
             "with": p.with_guard, "kept": p.kept,
             **({"kubernetes": p.kubernetes} if p.kubernetes else {})}
            for p in s.pairs]} for s in v.scenarios],
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
        "matrix": {"commit": m.commit, "shortCommit": m.short_commit, "date": m.date,
                   "rows": len(m.rows)},
        # each range as cni_delguard/ops/assess/verdicts.py's Range takes it
        "ranges": [{"name": r.name, "runtime": r.runtime, "label": r.label, "why": r.why,
                    "spans": [[list(low), list(high) if high else None] for low, high in r.spans]}
                   for r in ranges.RANGES],
        "chains": {c.name: {"label": c.label, "multus": c.multus, "standIn": c.stand_in}
                   for c in chains.CHAINS.values()},
        "verdicts": found,
    }


def dumps(m: matrix.Matrix) -> str:
    """One line per verdict: small, and a change to the matrix shows as a readable diff."""
    doc = build(m)
    head = {k: doc[k] for k in ("schema", "matrix", "ranges", "chains")}
    lines = [json.dumps(head, ensure_ascii=False)[:-1] + ', "verdicts": {']
    ranges_ = []
    for where, by_chain in doc["verdicts"].items():
        inner = ",\n".join(f"  {json.dumps(name)}: {json.dumps(e, ensure_ascii=False)}"
                           for name, e in by_chain.items())
        ranges_.append(f" {json.dumps(where)}: {{\n{inner}\n }}")
    lines.append(",\n".join(ranges_))
    lines.append("}}")
    return "\n".join(lines) + "\n"
