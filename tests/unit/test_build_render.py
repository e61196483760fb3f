"""delguard_build/render.py: the pages' tables from a matrix, between their markers."""

from __future__ import annotations

import dataclasses

import pytest

from delguard_build import chains, matrix, ranges, render, verdict

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def m(*rows: matrix.Row) -> matrix.Matrix:
    return matrix.Matrix(COMMIT, "2026-03-04", rows)


def row(runtime: str, version: str, chain: str, scenario: str, guard: bool, outcome: str,
        driver: str = "cri", kept: int | None = None) -> matrix.Row:
    return matrix.Row(runtime, version, chain, scenario, guard, outcome, 1.0, driver, kept)


@pytest.mark.parametrize(
    ("guards", "cell"),
    [
        pytest.param(("stuck", "removed"), "stuck → **removed**", id="guard-changes-it"),
        pytest.param(("stuck", "stuck"), "stuck → stuck", id="same"),
        pytest.param(("removed", None), "removed → -", id="with-guard-missing"),
    ],
)
def test_chain_table_cell(guards: tuple[str, str | None], cell: str) -> None:
    rows = [row("containerd", "v2.1.6", "fake-stateful", "reboot", guard, outcome)
            for guard, outcome in zip((False, True), guards, strict=True) if outcome]
    table = render.chain_tables(m(*rows))
    assert f"| reboot | {cell} |" in table, table
    assert "containerd v2.1.6" in table


def test_chain_table_counts_the_dels_kept() -> None:
    rows = [row("containerd", "v2.1.6", "multus-thick", "double-del", False, "removed"),
            row("containerd", "v2.1.6", "multus-thick", "double-del", True, "removed", kept=2)]
    assert "| double-del | removed → removed, 2 DELs kept |" in render.chain_tables(m(*rows))


def test_chain_table_columns_in_runtime_then_version_order() -> None:
    rows = [row(rt, v, "fake-stateful", "double-del", False, "stuck")
            for rt, v in (("cri-o", "1.36.3"), ("containerd", "v2.1.6"),
                          ("containerd", "1.6.20~ds1"), ("containerd", "v1.7.35"))]
    header = render.chain_tables(m(*rows)).splitlines()[4]
    assert header == ("| scenario | containerd 1.6.20~ds1 | containerd v1.7.35 | "
                      "containerd v2.1.6 | CRI-O 1.36.3 |"), header


def test_chain_table_has_a_column_per_kubernetes_release_a_kubelet_ran() -> None:
    rows = [dataclasses.replace(
        row("containerd", "v2.1.6", "fake-stateful", "reboot", guard, "removed", "kubelet"),
        kubernetes=k) for k in ("v1.37.2", "v1.35.4") for guard in (False, True)]
    header = render.chain_tables(m(*rows)).splitlines()[4]
    assert header == ("| scenario | containerd v2.1.6, Kubernetes v1.35.4 | "
                      "containerd v2.1.6, Kubernetes v1.37.2 |"), header


@pytest.mark.parametrize("target", render.TARGETS, ids=lambda t: t.page)
def test_every_render_names_the_commit_and_the_date(target: render.Target) -> None:
    text = render.render(target, m(row("cri-o", "1.36.3", "fake-stateful", "reboot", False,
                                       "removed")))
    assert "`0123456789ab`" in text and "2026-03-04" in text


def test_the_verdicts_table_cell_is_the_verdict_and_an_unmeasured_cell_says_so() -> None:
    rows = [row("containerd", "1.6.20~ds1", "fake-stateful", "reboot", False, "stuck"),
            row("containerd", "1.6.20~ds1", "fake-stateful", "reboot", True, "removed", kept=0)]
    table = render.verdicts(m(*rows))
    lines = table.splitlines()
    before = next(line for line in lines if line.startswith("| containerd below 1.6.37"))
    cells = [c.strip() for c in before.strip("|").split("|")]
    want = "<br>".join(verdict.lines(verdict.verdict(rows, ranges.RANGES[0], "fake-stateful")))
    assert cells[-1] == want.replace("→ freed", "→ **freed**")
    assert cells[-1].startswith("stuck → **freed**: reboot<br>")
    assert cells[1:-1] == ["not measured"] * 3  # the multus chains ran nowhere
    after = next(line for line in lines if line.startswith("| containerd 1.6.37+"))
    assert after.count("not measured") == 5  # the row head too: no version of it ran


def test_optional_columns_only_with_their_rows() -> None:
    plain = render.verdicts(m(row("cri-o", "1.36.3", "fake-stateful", "reboot", False,
                                  "removed")))
    assert "before kube-ovn and cilium-cni" not in plain
    reported = render.verdicts(m(row("containerd", "v2.1.6", "cozystack-multus-v4.3.0",
                                     "double-del", False, "removed")))
    assert "Cozystack v1.2.0 with multus v4.3.0 thick, before kube-ovn and cilium-cni |" in (
        reported)
    assert "multus v4.2.3" not in reported


def test_a_worse_outcome_is_bold() -> None:
    rows = [row("cri-o", "1.36.3", "fake-stateful", "reboot", False, "removed"),
            row("cri-o", "1.36.3", "fake-stateful", "reboot", True, "stuck")]
    assert f"**{verdict.WORSE_MARK}: reboot**" in render.verdicts(m(*rows))
    assert f"**{verdict.WORSE_MARK}: {verdict.DISRUPTED}**" in render.fixes(m(*rows))


def cell(table: str, starts: str, column: int) -> str:
    line = next(x for x in table.splitlines() if x.startswith(starts))
    return [c.strip() for c in line.strip("|").split("|")][column]


def test_the_short_table_names_situations_and_an_unmeasured_cell_says_so() -> None:
    rows = [row("containerd", "1.6.20~ds1", "fake-stateful", s, g, o)
            for s in ("reboot", "add-fails") for g, o in ((False, "stuck"), (True, "removed"))]
    table = render.fixes(m(*rows))
    assert cell(table, "| containerd below", 4) == (
        f"stuck → **freed**: {verdict.DISRUPTED}; {verdict.FAILED_ADD}")
    assert cell(table, "| containerd below", 1) == "not measured"
    assert cell(table, "| CRI-O", 4) == "not measured"


def test_a_column_of_chains_that_agree_says_it_once_and_of_chains_that_differ_each() -> None:
    same = [row("containerd", "v2.1.6", d, "double-del", g, "removed",
                kept=1 if g and d == "multus-thick" else None)
            for d in ("multus-thick", "cozystack-multus-v4.2.3") for g in (False, True)]
    assert cell(render.fixes(m(*same)), "| containerd 1.6.37+", 3) == (
        f"nothing stuck, with or without<br>{verdict.KEEPS}")
    differ = [*same,
              row("containerd", "v2.1.6", "cozystack-multus-v4.3.0", "reboot", False, "stuck"),
              row("containerd", "v2.1.6", "cozystack-multus-v4.3.0", "reboot", True, "removed")]
    said = cell(render.fixes(m(*differ)), "| containerd 1.6.37+", 3)
    first = f"`multus-thick`: nothing stuck, with or without; {verdict.KEEPS}<br>"
    assert said.startswith(first), said
    assert f"`cozystack-multus-v4.3.0`: stuck → **freed**: {verdict.DISRUPTED}" in said


def test_a_cell_measured_on_fewer_versions_than_its_row_names_them() -> None:
    rows = [row("containerd", v, "fake-stateful", "double-del", g, "removed")
            for v in ("v1.7.35", "v2.1.6") for g in (False, True)]
    rows += [row("containerd", "v2.1.6", "multus-thin", "double-del", g, "removed")
             for g in (False, True)]
    table = render.fixes(m(*rows))
    assert cell(table, "| containerd 1.6.37+", 1).endswith("<br>measured on: v2.1.6")
    assert "measured on" not in cell(table, "| containerd 1.6.37+", 4)


def test_the_sentence_above_the_table_names_where_the_guard_frees() -> None:
    rows = [row("containerd", "1.6.20~ds1", "multus-thin-path", "reboot", False, "stuck"),
            row("containerd", "1.6.20~ds1", "multus-thin-path", "reboot", True, "removed"),
            row("containerd", "v2.1.6", "multus-thick", "double-del", False, "removed"),
            row("containerd", "v2.1.6", "multus-thick", "double-del", True, "removed")]
    said = render.in_short(m(*rows))
    assert said == ("In short: the guard frees stuck sandboxes only with multus thin by path "
                    f"({ranges.RANGES[0].label}); in every other cell measured nothing was "
                    "stuck, or it stays stuck with the guard too.")
    assert said in render.fixes(m(*rows))
    worse = [row("cri-o", "1.36.3", "fake-stateful", "reboot", False, "removed"),
             row("cri-o", "1.36.3", "fake-stateful", "reboot", True, "stuck")]
    assert render.in_short(m(*worse)) == (
        "In short: the guard freed a stuck sandbox in no measured cell; the table says what "
        "else differs.")


def test_every_chain_is_in_one_column_of_the_short_table() -> None:
    placed = [d for c in render.COLUMNS for d in c.chains]
    assert sorted(placed) == sorted(matrix.CHAINS)


def test_an_empty_matrix_says_nothing_is_measured() -> None:
    text = render.fixes(matrix.Matrix("unknown", "unknown", ()))
    assert "holds no run yet" in text and "nothing below is measured" in text


@pytest.mark.parametrize(
    "page",
    [
        pytest.param("# README\nno table here\n", id="none"),
        pytest.param("<!-- fixes:end -->\n<!-- fixes:begin -->\n", id="reversed"),
        pytest.param("<!-- fixes:begin -->\n<!-- fixes:begin -->\n<!-- fixes:end -->\n",
                     id="twice"),
    ],
)
def test_a_page_without_its_markers_is_refused(page: str) -> None:
    with pytest.raises(render.MarkersError, match="fixes:begin"):
        render.split(page, render.README)


def test_a_begin_marker_may_carry_a_note() -> None:
    page = "a\n<!-- fixes:begin (rendered by tools/render.py) -->\nold\n<!-- fixes:end -->\n"
    before, between, after = render.split(page, render.README)
    assert before == "a\n<!-- fixes:begin (rendered by tools/render.py) -->"
    assert (between, after) == ("\nold\n", "<!-- fixes:end -->\n")


def test_rewrite_keeps_what_is_around_the_markers_and_diff_sees_a_change() -> None:
    page = "# Title\nprose\n<!-- matrix:begin -->\nold table\n<!-- matrix:end -->\nafter\n"
    data = m(row("cri-o", "1.36.3", "fake-stateful", "reboot", False, "removed"))
    new = render.rewritten(page, render.COMPATIBILITY, data)
    assert new.startswith("# Title\nprose\n<!-- matrix:begin -->\n")
    assert new.endswith("<!-- matrix:end -->\nafter\n") and "old table" not in new
    assert render.diff(new, render.COMPATIBILITY, data) == ""
    assert "-old table" in render.diff(page, render.COMPATIBILITY, data)


def test_every_driver_and_chain_has_its_words() -> None:
    assert set(render.DRIVER_NAMES) == set(matrix.DRIVERS)
    assert set(chains.CHAINS) == set(matrix.CHAINS)
    assert set(render.RUNTIME_NAMES) == set(matrix.RUNTIMES)
