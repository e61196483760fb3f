"""What `assess` says about a node, from what the probe found and the shipped verdicts (pure).

`assessment(found, shipped)` puts the node in a runtime range (ranges.py) and a kind of chain
(chains.py) and looks up, for each chain the matrix measured for that kind, its verdict in that
range (verdicts.py). A node whose runtime, version or chain the matrix cannot place, or whose
range has no verdict of its chain, is unmeasured: said so, never mapped to the nearest row.
`as_json` is the `--output json` document (SCHEMA), `text` the short human one, `summary` the
one line the installer logs at start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cni_delguard.ops.assess import chains, ranges
from cni_delguard.ops.assess.facts import Found
from cni_delguard.ops.assess.verdicts import Chain, Shipped

SCHEMA = 2  # 2: `behind.plugins` (was `delegates`), `matrix.rows`
# Where to read the runtime when the node shows it nowhere assess can look (the installer's pod
# mounts the node's CNI dirs alone: no runtime socket, binary or /proc of the node's).
RUNTIME_HINT = (
    "give it as `--runtime NAME://VERSION`, as `kubectl get node NODE -o wide` shows it "
    "(CONTAINER-RUNTIME, e.g. containerd://2.1.6)"
)
RELEASE_VALVE = ("`cni-delguard release` frees a sandbox whose DEL keeps failing after a "
                 "completed ADD (docs/troubleshooting.md)")


# Effects as the shipped scenarios name them (delguard_build/verdict.py's EFFECTS).
STUCK, WORSE = "stuck-either-way", "stuck-with-guard-only"


@dataclass(frozen=True)
class Measured:
    """A chain the matrix measured for the node's kind, and its verdict in the node's range."""

    chain: Chain
    verdict: dict[str, Any]  # as shipped (verdicts.py)
    exact: bool  # the node's runtime version is one the chain ran on

    def named(self, key: str) -> list[str]:
        return list(self.verdict[key])

    def held(self) -> list[str]:
        """The scenarios stuck with the guard too, in the matrix's order."""
        return [s["scenario"] for s in self.verdict["scenarios"] if s["effect"] in (STUCK, WORSE)]


@dataclass(frozen=True)
class Assessment:
    found: Found
    shipped: Shipped
    range: ranges.Range | None
    kind: chains.Kind | None
    measured: tuple[Measured, ...]  # the kind's chains that have rows in the range
    unmeasured: tuple[str, ...]  # the kind's chains that have none there
    why_unmeasured: str  # "" when something was measured

    @property
    def status(self) -> str:
        return "measured" if self.measured else "unmeasured"


def assessment(found: Found, shipped: Shipped) -> Assessment:
    rt = found.runtime
    where = ranges.of(rt.name, rt.version) if rt and rt.name and rt.version else None
    kind = chains.classify(found.behind)
    why = [why for bad, why in (
        (rt is None, f"the runtime was not found: {RUNTIME_HINT}"),
        (rt is not None and (rt.name is None or rt.version is None),
         f"runtime {rt.reported_name if rt else ''} {rt.version if rt else ''} is not one the "
         "matrix ran"),
        (rt is not None and rt.name is not None and rt.version is not None and where is None,
         f"{rt.name if rt else ''} {rt.version if rt else ''} is in no range of the matrix"),
        (kind is None, "no plugin found behind the guard"),
        (kind is not None and not kind.chains,
         f"the matrix ran no chain of this kind ({kind.label if kind else ''})"),
    ) if bad]
    measured, unmeasured = [], []
    if where is not None and kind is not None and rt is not None:
        for name in kind.chains:
            v = shipped.of(where.name, name)
            if v is not None:
                measured.append(Measured(shipped.chains[name], v, rt.version in v["versions"]))
            else:
                unmeasured.append(name)
    if not why and not measured:
        why = [f"the matrix has no row of {', '.join(kind.chains) if kind else '?'} in this "
               "range"]
    return Assessment(found, shipped, where, kind, tuple(measured), tuple(unmeasured),
                      "; ".join(why) if not measured else "")


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
    if b.plugins:
        what += f" -> {', '.join(b.plugins)}"
    return what


def summary(a: Assessment) -> str:
    """One line: the runtime, the chain, and what the matrix says (or that it is unmeasured)."""
    head = f"{_runtime_text(a)}; {_behind_text(a)}"
    tail = f" (matrix {a.shipped.short_commit} of {a.shipped.date})"
    first = primary(a)
    if first is None:
        return f"{head}: unmeasured: {a.why_unmeasured}{tail}"
    stuck, freed, held = first.named("stuckWithout"), first.named("freed"), first.held()
    said = [f"stuck without the guard: {', '.join(stuck) or 'nothing measured'}",
            f"the guard frees: {', '.join(freed) or 'nothing'}"]
    if held:
        valve = ("`cni-delguard release` frees such a sandbox: measured"
                 if first.named("freedByRelease") else
                 "the release valve: `cni-delguard release`")
        said.append(f"stuck with it too: {', '.join(held)} ({valve})")
    kept = first.verdict["keptFromDelegate"]
    if kept:
        said.append(f"it keeps DELs from the delegate in: {', '.join(kept)}")
    versions = ("this version" if first.exact else
                f"measured on {', '.join(first.named('versions'))}")
    return f"{head}: {'; '.join(said)} [{first.chain.name}, {versions}]{tail}"


def text(a: Assessment, layout: str, conf_dir: str) -> list[str]:
    f = a.found
    rt = f.runtime
    lines = [f"cni-delguard assess (read-only): layout {layout}, conf dir {conf_dir}"]
    if rt is None:
        lines.append("runtime:  not found (" + "; ".join(f.tried or ["no source"]) + ")")
    else:
        lines.append(f"runtime:  {_runtime_text(a)}, from {rt.source}")
    where = a.range
    about = "none" if where is None else where.label + (f" ({where.why})" if where.why else "")
    lines.append(f"range:    {about}")
    if f.conf_path is None:
        lines.append("conf:     none found")
    else:
        state = f"wrapped by cni-delguard ({f.mode})" if f.wrapped else "not wrapped"
        lines.append(f"conf:     {f.conf_path}: {f.conf_error or state}")
    lines.append(f"behind:   {_behind_text(a)}")
    if f.behind.plugin in (chains.MULTUS_THIN, chains.MULTUS_THICK):
        lines.append(f"          multus version from: {f.multus_version_from or 'unknown'}")
    lines.append(f"chain:    {a.kind.label if a.kind else 'none'}")
    lines.extend(f"note:     {n}" for n in f.notes)
    lines.append(f"matrix:   commit {a.shipped.short_commit}, run on {a.shipped.date}")
    if not a.measured:
        lines.append(f"unmeasured: {a.why_unmeasured}")
    for x in a.measured:
        multus = f", multus {x.chain.multus}" if x.chain.multus else ""
        on = "this version" if x.exact else f"not this version; {', '.join(x.named('versions'))}"
        lines.append(f"  {x.chain.name} ({x.chain.label}{multus}; {on}):")
        if x.chain.stand_in and f.behind.plugin:
            lines.append(f"    (a stand-in: whether {f.behind.plugin} fails a DEL once it holds "
                         "no state was not measured)")
        lines.extend(f"    {line}" for line in x.named("lines"))
    for name in a.unmeasured:
        lines.append(f"  {name}: not measured in this range")
    if any(x.named("stuckWithGuard") or x.named("freedByRelease") or
           x.named("stuckOnlyWithGuard") for x in a.measured):
        lines.append(f"not freed by the guard: {RELEASE_VALVE}")
    lines.append(f"summary:  {summary(a)}")
    return lines


def as_json(a: Assessment, root: str, layout: str, conf_dir: str, bin_dir: str) -> dict[str, Any]:
    f, b, rt = a.found, a.found.behind, a.found.runtime
    return {
        "schema": SCHEMA,
        "root": root,
        "layout": layout,
        "confDir": conf_dir,
        "binDir": bin_dir,
        "runtime": None if rt is None else {
            "name": rt.name, "reportedName": rt.reported_name, "version": rt.version,
            "from": rt.source},
        "runtimeTried": f.tried,
        "range": None if a.range is None else {"name": a.range.name, "label": a.range.label},
        "conf": {"path": f.conf_path, "error": f.conf_error, "wrapped": f.wrapped,
                 "mode": f.mode},
        "behind": {"plugin": b.plugin, "clusterNetworkForm": b.form,
                   "clusterNetwork": b.cluster_network, "multusConfigFile": b.config_file,
                   "multusVersion": b.multus_version,
                   "multusVersionFrom": f.multus_version_from or None,
                   "plugins": list(b.plugins)},
        "chain": None if a.kind is None else {"kind": a.kind.name, "label": a.kind.label},
        "notes": f.notes,
        "matrix": {"commit": a.shipped.commit, "date": a.shipped.date},
        "status": a.status,
        "unmeasuredBecause": a.why_unmeasured or None,
        "measured": [_measured_json(x) for x in a.measured],
        "unmeasuredChains": list(a.unmeasured),
        "releaseValve": RELEASE_VALVE,
        "summary": summary(a),
    }


def _measured_json(x: Measured) -> dict[str, Any]:
    shown = {k: v for k, v in x.verdict.items() if k != "lines"}
    return {"chain": x.chain.name, "label": x.chain.label, "multusVersion": x.chain.multus,
            "standIn": x.chain.stand_in, "thisVersion": x.exact, **shown}
