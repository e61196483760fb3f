"""What `assess` says about a node, from what the probe found and the shipped verdicts (pure).

`assessment()` puts the node in a runtime range and a kind of chain and looks up, for each chain
the matrix measured for that kind, its verdict in that range. A node the matrix cannot place, or
whose range has no verdict of its chain, is unmeasured: said so, never mapped to the nearest
row. `as_json` is the `--output json` document, `text` the human one, `summary` one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cni_delguard.ops.assess import chains
from cni_delguard.ops.assess.verdicts import Chain, Range, Shipped

SCHEMA = 2  # `behind.plugins` names the plugin types behind multus (schema 1: `delegates`)
RUNTIME_HINT = ("give it as `--runtime NAME://VERSION`, as `kubectl get node NODE -o wide` shows "
                "it (CONTAINER-RUNTIME, e.g. containerd://2.1.6)")
RELEASE_VALVE = ("`cni-delguard release` frees a sandbox whose DEL keeps failing after a "
                 "completed ADD (docs/runbooks.md)")
STUCK_WITH_IT = ("stuckWithGuard", "freedByRelease", "stuckOnlyWithGuard")


@dataclass(frozen=True)
class Runtime:
    name: str | None  # the matrix's runtime name, None when not one it ran (probe.CRI_NAMES)
    version: str | None
    source: str  # where it was found ("--runtime containerd://2.1.6", "package containerd ...")
    reported_name: str = ""  # as the runtime named itself


@dataclass
class Found:
    """The node as assess sees it: the probe fills it, the assessment reads it."""

    root: str = "/"
    layout: str = ""
    conf_dir: str = ""
    bin_dir: str = ""
    runtime: Runtime | None = None
    tried: list[str] = field(default_factory=list)  # why each runtime source gave nothing
    conf_path: str | None = None
    conf_error: str | None = None
    wrapped: bool = False
    mode: str | None = None
    behind: chains.Behind = field(default_factory=lambda: chains.Behind(None))
    multus_version_from: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Measured:
    """A chain the matrix measured for the node's kind, and its verdict in the node's range."""

    chain: Chain
    verdict: dict[str, Any]  # as shipped (verdicts.py)
    exact: bool  # the node's runtime version is one the chain ran on

    def on(self, other: str) -> str:
        return "this version" if self.exact else f"{other}{', '.join(self.verdict['versions'])}"


@dataclass(frozen=True)
class Assessment:
    found: Found
    shipped: Shipped
    range: Range | None
    kind: chains.Kind | None
    measured: tuple[Measured, ...]  # the kind's chains that have a verdict in the range
    unmeasured: tuple[str, ...]  # the kind's chains that have none there
    why_unmeasured: str  # "" when something was measured

    def as_json(self) -> dict[str, Any]:
        return as_json(self)

    def text(self) -> list[str]:
        return text(self)

    def summary(self) -> str:
        return summary(self)


def assessment(found: Found, shipped: Shipped) -> Assessment:
    rt = found.runtime
    name, version = (rt.name, rt.version) if rt else (None, None)
    where = shipped.range_of(name, version) if name and version else None
    kind = chains.classify(found.behind)
    why = []
    if rt is None:
        why.append(f"the runtime was not found: {RUNTIME_HINT}")
    elif name is None or version is None:
        why.append(f"runtime {rt.reported_name} {version or ''} is not one the matrix ran")
    elif where is None:
        why.append(f"{name} {version} is in no range of the matrix")
    if kind is None:
        why.append("no plugin found behind the guard")
    elif not kind.chains:
        why.append(f"the matrix ran no chain of this kind ({kind.label})")
    measured, unmeasured = [], []
    if where is not None and kind is not None:
        for chain in kind.chains:
            v = shipped.of(where.name, chain)
            if v is None:
                unmeasured.append(chain)
            else:
                measured.append(Measured(shipped.chains[chain], v, version in v["versions"]))
    if not why and not measured and kind is not None:
        why.append(f"the matrix has no row of {', '.join(kind.chains)} in this range")
    return Assessment(found, shipped, where, kind, tuple(measured), tuple(unmeasured),
                      "" if measured else "; ".join(why))


def primary(a: Assessment) -> Measured | None:
    """The measured chain the summary speaks of: the one that ran the node's multus version,
    else the first of the kind's (the table's order)."""
    mine = [x for x in a.measured if x.chain.multus == a.found.behind.multus_version]
    return next(iter(mine or a.measured), None)


def _runtime_text(a: Assessment) -> str:
    rt = a.found.runtime
    if rt is None:
        return "runtime not found"
    return f"{rt.reported_name or rt.name} {rt.version or '(version unknown)'}"


def _behind_text(a: Assessment) -> str:
    b = a.found.behind
    if b.plugin is None:
        return "no plugin found behind the guard"
    if b.plugin not in (chains.MULTUS_THIN, chains.MULTUS_THICK):
        return f"{b.plugin} (not multus)"
    what = "multus thick" if b.plugin == chains.MULTUS_THICK else "multus thin"
    what += f" {b.multus_version}" if b.multus_version else ""
    if b.form == chains.INLINE:
        what += ", its network inline"
    elif b.form is not None:
        what += f", clusterNetwork by {b.form} {b.cluster_network}"
    if b.config_file is not None:
        what += f", multusConfigFile {b.config_file}"
    return what + (f" -> {', '.join(b.plugins)}" if b.plugins else "")


def summary(a: Assessment) -> str:
    """One line: the runtime, the chain, and what the matrix says (or that it is unmeasured)."""
    x = primary(a)
    said = (f"unmeasured: {a.why_unmeasured}" if x is None else
            f"{'; '.join(x.verdict['said'])} [{x.chain.name}, {x.on('measured on ')}]")
    return (f"{_runtime_text(a)}; {_behind_text(a)}: {said} "
            f"(matrix {a.shipped.short_commit} of {a.shipped.date})")


def text(a: Assessment) -> list[str]:
    f, rt, where = a.found, a.found.runtime, a.range
    runtime = (f"{_runtime_text(a)}, from {rt.source}" if rt else
               "not found (" + "; ".join(f.tried or ["no source"]) + ")")
    conf = "none found" if f.conf_path is None else f"{f.conf_path}: " + (
        f.conf_error or (f"wrapped by cni-delguard ({f.mode})" if f.wrapped else "not wrapped"))
    lines = [f"cni-delguard assess (read-only): layout {f.layout}, conf dir {f.conf_dir}",
             f"runtime:  {runtime}",
             "range:    " + ("none" if where is None else where.label +
                             (f" ({where.why})" if where.why else "")),
             f"conf:     {conf}", f"behind:   {_behind_text(a)}"]
    if f.behind.plugin in (chains.MULTUS_THIN, chains.MULTUS_THICK):
        lines.append(f"          multus version from: {f.multus_version_from or 'unknown'}")
    lines.append(f"chain:    {a.kind.label if a.kind else 'none'}")
    lines.extend(f"note:     {n}" for n in f.notes)
    lines.append(f"matrix:   commit {a.shipped.short_commit}, run on {a.shipped.date}")
    if not a.measured:
        lines.append(f"unmeasured: {a.why_unmeasured}")
    for x in a.measured:
        multus = f", multus {x.chain.multus}" if x.chain.multus else ""
        lines.append(f"  {x.chain.name} ({x.chain.label}{multus}; {x.on('not this version; ')}):")
        if x.chain.stand_in and f.behind.plugin:
            lines.append(f"    (a stand-in: whether {f.behind.plugin} fails a DEL once it holds "
                         "no state was not measured)")
        lines.extend(f"    {line}" for line in x.verdict["lines"])
    lines.extend(f"  {name}: not measured in this range" for name in a.unmeasured)
    if any(x.verdict[k] for x in a.measured for k in STUCK_WITH_IT):
        lines.append(f"not freed by the guard: {RELEASE_VALVE}")
    return [*lines, f"summary:  {summary(a)}"]


def as_json(a: Assessment) -> dict[str, Any]:
    f, b, rt = a.found, a.found.behind, a.found.runtime
    return {
        "schema": SCHEMA, "root": f.root, "layout": f.layout, "confDir": f.conf_dir,
        "binDir": f.bin_dir,
        "runtime": rt and {"name": rt.name, "reportedName": rt.reported_name,
                           "version": rt.version, "from": rt.source},
        "runtimeTried": f.tried,
        "range": a.range and {"name": a.range.name, "label": a.range.label},
        "conf": {"path": f.conf_path, "error": f.conf_error, "wrapped": f.wrapped,
                 "mode": f.mode},
        "behind": {"plugin": b.plugin, "clusterNetworkForm": b.form,
                   "clusterNetwork": b.cluster_network, "multusConfigFile": b.config_file,
                   "multusVersion": b.multus_version,
                   "multusVersionFrom": f.multus_version_from or None, "plugins": list(b.plugins)},
        "chain": a.kind and {"kind": a.kind.name, "label": a.kind.label},
        "notes": f.notes,
        "matrix": {"commit": a.shipped.commit, "date": a.shipped.date},
        "status": "measured" if a.measured else "unmeasured",
        "unmeasuredBecause": a.why_unmeasured or None,
        "measured": [{"chain": x.chain.name, "label": x.chain.label, "multusVersion":
                      x.chain.multus, "standIn": x.chain.stand_in, "thisVersion": x.exact,
                      **{k: v for k, v in x.verdict.items() if k not in ("lines", "said")}}
                     for x in a.measured],
        "unmeasuredChains": list(a.unmeasured),
        "releaseValve": RELEASE_VALVE,
        "summary": summary(a),
    }
