"""The matrix of record as Markdown: README's "Does it fix my problem?" table and the per-chain
tables of docs/compatibility.md, each between its markers, each naming the commit and the date
of the run it came from (pure: text in, text out; tools/render.py reads and writes).

    TARGETS                   the pages, their markers and what renders between them
    render(target, matrix)    the text between the target's markers
    rewritten(page, target, matrix), diff(page, target, matrix)

README's "Does it fix" table has a row per runtime range (ranges.RANGES) and a column per kind of
plugin behind the guard (COLUMNS); each cell is verdict.brief(): the situations freed and those
stuck either way. docs/compatibility.md's verdicts table has a column per measured chain
(chains.CHAINS; the optional ones only when the matrix has their rows), each cell
verdict.lines(): only what the rows say, "not measured" where none. The per-chain tables have a
row per scenario and a column per runtime version (outcome without the guard → with it; bold
where the guard changes it; the DELs it kept from the delegate).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass

from delguard_build import chains, matrix, ranges, verdict

RECORD = matrix.RECORD
RUNTIME_NAMES = {"containerd": "containerd", "cri-o": "CRI-O"}
DRIVER_NAMES = {"cri": "CRI calls written by the test", "kubelet": "a real kubelet",
                "cluster": "a one-node cluster: API server, controllers, scheduler, kubelet"}
MISSING = "-"


def provenance(m: matrix.Matrix) -> str:
    if not m.rows:
        return (f"`{RECORD}`, the file `cni-delguard assess` takes its verdicts from, holds no "
                f"run yet (commit {m.short_commit}, date {m.date}): nothing below is measured.")
    return (f"Rendered by `tools/render.py --record` from the end-to-end run of commit "
            f"`{m.short_commit}` on {m.date} (UTC), {len(m.rows)} rows: `{RECORD}`, the file "
            "`cni-delguard assess` takes its verdicts from.")


# --- README: does it fix my problem? -----------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A column of README's short table: what a user has behind the guard, and the measured
    chains that stand for it (each chain in one column; tests/unit)."""

    label: str
    chains: tuple[str, ...]
    short: str  # as the sentence above the table names it


COLUMNS = (
    Column("multus thin, delegate inline", ("multus-thin",), "multus thin inline"),
    Column("multus thin, delegate by path (`clusterNetwork`)", ("multus-thin-path",),
           "multus thin by path"),
    Column("multus thick (also the reported stack: Cozystack's, v4.2.3 in auto mode)",
           ("multus-thick", "cozystack-multus-v4.2.3", "cozystack-multus-v4.3.0"),
           "multus thick"),
    Column("a delegate that fails DEL once it holds no state", ("fake-stateful",),
           "a delegate that fails DEL once it holds no state"),
)


def in_short(m: matrix.Matrix) -> str:
    """One sentence from the same verdicts as the table: where the guard frees a stuck sandbox,
    and whether every other measured cell is nothing-stuck or stuck-either-way."""
    freed, odd = [], False
    for c in COLUMNS:
        where = []
        for r in ranges.RANGES:
            found = [verdict.verdict(m.rows, r, d) for d in c.chains]
            if any(v.named(verdict.FREED) for v in found):
                where.append(r.label)
            odd |= any(v.named(verdict.WORSE, verdict.DISAGREE, verdict.CHANGED) for v in found)
        if where:
            freed.append(f"{c.short} ({'; '.join(where)})")
    if not m.rows:
        return "In short: nothing is measured yet."
    said = ("In short: the guard frees stuck sandboxes only with " + ", and with ".join(freed)
            if freed else "In short: the guard freed a stuck sandbox in no measured cell")
    rest = ("; the table says what else differs" if odd else
            "; in every other cell measured nothing was stuck, or it stays stuck with the guard "
            "too")
    return said + rest + "."


def _markdown(line: str) -> str:
    """A verdict line in a table cell: what the guard changes for the better or the worse is
    bold."""
    line = line.replace("|", "\\|").replace("→ freed", "→ **freed**")
    if line.startswith(verdict.WORSE_MARK):
        return f"**{line}**"
    return line


def _versions(m: matrix.Matrix, where: ranges.Range, names: tuple[str, ...] | None = None
              ) -> list[str]:
    found = {r.version for r in m.rows if where.holds(r.runtime, r.version)
             and (names is None or r.chain in names)}
    return sorted(found, key=lambda v: (ranges.sort_key(v), v))


def _short_cell(m: matrix.Matrix, where: ranges.Range, column: Column) -> str:
    """verdict.brief() of each chain of the column that ran in the range: once when they all say
    the same (but for the DELs kept, which some runs count and others not), else each under its
    chain's name; the versions when fewer than the row's."""
    briefs = {d: verdict.brief(verdict.verdict(m.rows, where, d)) for d in column.chains
              if any(r.chain == d and where.holds(r.runtime, r.version) for r in m.rows)}
    if not briefs:
        return "not measured"
    said = list(briefs.values())
    # The chains agree when they agree on what is stuck and freed; DELs kept are counted in some
    # runs only (None: not counted), so one that counted them speaks for the column.
    stuck = [[line for line in b if line != verdict.KEEPS] for b in said]
    if all(b == stuck[0] for b in stuck):
        lines = stuck[0] + ([verdict.KEEPS] if any(verdict.KEEPS in b for b in said) else [])
    else:
        lines = [f"`{d}`: {'; '.join(b)}" for d, b in briefs.items()]
    ran = _versions(m, where, column.chains)
    if ran != _versions(m, where):
        lines = [*lines, f"measured on: {', '.join(ran)}"]
    return "<br>".join(_markdown(line) for line in lines)


def fixes(m: matrix.Matrix) -> str:
    """README's short table: a row per runtime range, a column per kind of plugin behind the
    guard, each cell what a newcomer needs (verdict.brief()); the full verdicts are
    docs/compatibility.md's (verdicts())."""
    table = _by_range(m, [c.label for c in COLUMNS],
                      lambda where: [_short_cell(m, where, c) for c in COLUMNS])
    return "\n".join([in_short(m), "", provenance(m), "", *table]) + "\n"


def _by_range(m: matrix.Matrix, labels: list[str],
              cells: Callable[[ranges.Range], list[str]]) -> list[str]:
    """A Markdown table with a row per runtime range (its head: _row_head) and these columns."""
    return _rows(["your node", *labels],
                 [[_row_head(m, where), *cells(where)] for where in ranges.RANGES])


def _rows(head: list[str], body: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head),
            *("| " + " | ".join(row) + " |" for row in body)]


def _row_head(m: matrix.Matrix, where: ranges.Range) -> str:
    """The range, and every version of it the matrix ran."""
    versions = _versions(m, where)
    return f"{where.label} ({'measured: ' + ', '.join(versions) if versions else 'not measured'})"


# --- docs/compatibility.md: the full verdicts, and every chain's table -------------------------


def columns(m: matrix.Matrix) -> list[chains.Chain]:
    present = {r.chain for r in m.rows}
    return [c for c in chains.CHAINS.values() if not c.optional or c.name in present]


def verdicts(m: matrix.Matrix) -> str:
    """A row per runtime range, a column per measured chain, each cell verdict.lines(): the
    scenarios by name, the DELs kept, the versions each rests on."""
    cols = columns(m)
    table = _by_range(m, [c.label for c in cols], lambda where: [
        "<br>".join(_markdown(line)
                    for line in verdict.lines(verdict.verdict(m.rows, where, c.name)))
        for c in cols])
    return "\n".join([provenance(m), "", *table]) + "\n"




def _cell(without: matrix.Row | None, with_guard: matrix.Row | None) -> str:
    a = without.outcome if without else None
    b = with_guard.outcome if with_guard else None
    text = (f"{a} → **{b}**" if a is not None and b is not None and a != b
            else f"{a or MISSING} → {b or MISSING}")
    if with_guard is not None and with_guard.kept:
        text += f", {with_guard.kept} DEL{'s' if with_guard.kept > 1 else ''} kept"
    return text


def _table(rows: list[matrix.Row]) -> list[str]:
    """A column per runtime version, and per Kubernetes release where a kubelet drove it."""
    cols = sorted({(r.runtime, r.version, r.kubernetes or "") for r in rows},
                  key=lambda c: (matrix.RUNTIMES.index(c[0]), ranges.sort_key(c[1]), c[1],
                                 ranges.sort_key(c[2]), c[2]))
    by = {(r.runtime, r.version, r.kubernetes or "", r.scenario, r.guard): r for r in rows}
    head = ["scenario", *(f"{RUNTIME_NAMES[rt]} {v}{', Kubernetes ' + k if k else ''}"
                          for rt, v, k in cols)]
    return _rows(head, [
        [scenario, *(_cell(by.get((*col, scenario, False)), by.get((*col, scenario, True)))
                     for col in cols)]
        for scenario in matrix.SCENARIOS if any(r.scenario == scenario for r in rows)])


def chain_tables(m: matrix.Matrix) -> str:
    groups = sorted({(r.chain, r.driver) for r in m.rows},
                    key=lambda g: (matrix.CHAINS.index(g[0]), matrix.DRIVERS.index(g[1])))
    out = [provenance(m), ""]
    if not groups:
        return "\n".join([*out, "The matrix holds no row yet."]) + "\n"
    for name, driver in groups:
        out.append(f"`{name}` ({chains.CHAINS[name].description}) behind the guard, driven by "
                   f"{DRIVER_NAMES[driver]} (without the guard → with it):")
        out.append("")
        out.extend(_table([r for r in m.rows if (r.chain, r.driver) == (name, driver)]))
        out.append("")
    return "\n".join(out)


# --- the pages ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    page: str  # relative to the repository
    name: str  # the markers are <!-- NAME:begin ... --> and <!-- NAME:end -->
    render: Callable[[matrix.Matrix], str]

    @property
    def begin(self) -> str:
        """The begin marker's start: a note may follow before its `-->`."""
        return f"<!-- {self.name}:begin"

    @property
    def end(self) -> str:
        return f"<!-- {self.name}:end -->"


README = Target("README.md", "fixes", fixes)
VERDICTS = Target("docs/compatibility.md", "verdicts", verdicts)
COMPATIBILITY = Target("docs/compatibility.md", "matrix", chain_tables)
TARGETS = (README, VERDICTS, COMPATIBILITY)


class MarkersError(ValueError):
    """A page without its markers (or with them twice, or out of order)."""


def split(page: str, target: Target) -> tuple[str, str, str]:
    """The page as (up to and with the begin marker, between, from the end marker on)."""
    if page.count(target.begin) != 1 or page.count(target.end) != 1:
        raise MarkersError(f"{target.page}: needs one {target.begin} ... --> and one "
                           f"{target.end}")
    opened = page.index(target.begin)
    closed = page.find("-->", opened)
    start, end = closed + len("-->"), page.index(target.end)
    if closed < 0 or end < start:
        raise MarkersError(f"{target.page}: {target.end} comes before {target.begin} ... -->")
    return page[:start], page[start:end], page[end:]


def render(target: Target, m: matrix.Matrix) -> str:
    return target.render(m)


def rewritten(page: str, target: Target, m: matrix.Matrix) -> str:
    before, _, after = split(page, target)
    return f"{before}\n{render(target, m)}{after}"


def diff(page: str, target: Target, m: matrix.Matrix) -> str:
    """What --write would change in the page ("" when it is the render of `m`)."""
    new = rewritten(page, target, m)
    return "".join(difflib.unified_diff(page.splitlines(keepends=True),
                                        new.splitlines(keepends=True), target.page,
                                        f"{target.page} (rendered from the matrix)"))
