"""delguard_build/verdict.py: one range and one chain, from rows only."""

from __future__ import annotations

import dataclasses

import pytest

from delguard_build import matrix, ranges, verdict

BEFORE = ranges.BY_NAME["containerd-before-boundary"]
AFTER = ranges.BY_NAME["containerd-after-boundary"]


def rows(*cases: tuple[str, str, str | None, str | None], chain: str = "fake-stateful",
         driver: str = "cri", kept: int | None = None) -> list[matrix.Row]:
    """(version, scenario, without, with) -> the two rows (a None outcome: that run missing)."""
    out = []
    for version, scenario, without, with_guard in cases:
        for guard, outcome in ((False, without), (True, with_guard)):
            if outcome is not None:
                out.append(matrix.Row("containerd", version, chain, scenario, guard, outcome,
                                      1.0, driver, kept if guard else None))
    return out


@pytest.mark.parametrize(
    ("without", "with_guard", "effect"),
    [
        pytest.param("stuck", "removed", verdict.FREED, id="freed"),
        pytest.param("stuck", "released", verdict.RELEASE, id="release"),
        pytest.param("stuck", "stuck", verdict.STUCK, id="stuck"),
        pytest.param("removed", "removed", verdict.UNCHANGED, id="unchanged"),
        pytest.param("error-returned", "error-returned", verdict.UNCHANGED, id="error-kept"),
        pytest.param("removed", "stuck", verdict.WORSE, id="worse"),
        pytest.param("error-returned", "removed", verdict.CHANGED, id="error-hidden"),
        pytest.param(None, "released", verdict.HALF, id="half"),
        pytest.param("stuck", None, verdict.HALF, id="other-half"),
    ],
)
def test_effect(without: str | None, with_guard: str | None, effect: str) -> None:
    assert verdict.effect(without, with_guard) == effect


def test_a_range_takes_only_its_versions_and_its_chain() -> None:
    data = [*rows(("1.6.20~ds1", "reboot", "stuck", "removed")),
            *rows(("v1.7.35", "reboot", "removed", "removed")),
            *rows(("1.6.20~ds1", "reboot", "removed", "removed"), chain="multus-thin")]
    v = verdict.verdict(data, BEFORE, "fake-stateful")
    assert v.versions == ("1.6.20~ds1",)
    assert [(s.name, s.effect) for s in v.scenarios] == [("reboot", verdict.FREED)]
    assert verdict.verdict(data, AFTER, "fake-stateful").named(verdict.UNCHANGED) == ["reboot"]


def test_versions_that_disagree_are_shown_each() -> None:
    data = rows(("1.6.20~ds1", "client-deadline", "stuck", "removed"),
                ("v1.7.22", "client-deadline", "removed", "removed"))
    v = verdict.verdict(data, BEFORE, "fake-stateful")
    (scenario,) = v.scenarios
    assert scenario.effect == verdict.DISAGREE
    assert v.versions == ("1.6.20~ds1", "v1.7.22")
    text = verdict.lines(v)
    assert ("versions disagree: client-deadline (1.6.20~ds1: stuck → removed; v1.7.22: "
            "removed → removed)") in text


def test_kubernetes_releases_are_pairs_of_their_own_and_named_when_they_disagree() -> None:
    data = [*rows(("1.6.20~ds1", "reboot", "stuck", "removed"), driver="kubelet"),
            *(dataclasses.replace(r, kubernetes="v1.37.2", outcome="removed") for r in
              rows(("1.6.20~ds1", "reboot", "stuck", "removed"), driver="kubelet"))]
    (scenario,) = verdict.verdict(data, BEFORE, "fake-stateful").scenarios
    assert [(p.kubernetes, p.without) for p in scenario.pairs] == [
        (None, "stuck"), ("v1.37.2", "removed")]
    assert verdict.disagreement(scenario) == (
        "reboot (1.6.20~ds1 kubelet: stuck → removed; "
        "1.6.20~ds1 kubelet v1.37.2: removed → removed)")


def test_a_run_of_one_side_agrees_when_its_outcome_is_the_full_runs() -> None:
    data = [*rows(("1.6.20~ds1", "release", "stuck", "released")),
            *rows(("1.6.20~ds1", "release", None, "released"), driver="kubelet")]
    (scenario,) = verdict.verdict(data, BEFORE, "fake-stateful").scenarios
    assert scenario.effect == verdict.RELEASE


def test_a_run_of_one_side_that_differs_is_a_disagreement() -> None:
    data = [*rows(("1.6.20~ds1", "release", "stuck", "released")),
            *rows(("1.6.20~ds1", "release", None, "stuck"), driver="kubelet")]
    (scenario,) = verdict.verdict(data, BEFORE, "fake-stateful").scenarios
    assert scenario.effect == verdict.DISAGREE


def test_kept_is_counted_or_said_to_be_not() -> None:
    counted = rows(("v2.1.6", "double-del", "removed", "removed"), chain="multus-thick",
                   kept=1)
    assert verdict.verdict(counted, AFTER, "multus-thick").kept == ["double-del"]
    none = rows(("v2.1.6", "double-del", "removed", "removed"), chain="multus-thick", kept=0)
    assert verdict.verdict(none, AFTER, "multus-thick").kept == []
    old = rows(("v2.1.6", "double-del", "removed", "removed"), chain="multus-thick")
    assert verdict.verdict(old, AFTER, "multus-thick").kept is None


@pytest.mark.parametrize(
    ("cases", "kept", "expected"),
    [
        pytest.param([], None, ["not measured"], id="no-row"),
        pytest.param(
            [("1.6.20~ds1", "double-del", "stuck", "removed"),
             ("1.6.20~ds1", "completed-del-fails", "stuck", "stuck"),
             ("1.6.20~ds1", "release", "stuck", "released")], 1,
            ["stuck → freed: double-del",
             "stuck either way: completed-del-fails",
             "stuck → freed by `cni-delguard release`: release",
             "DELs kept from the delegate: in double-del, completed-del-fails, release",
             "measured: 1.6.20~ds1"],
            id="fake-stateful-on-1.6"),
        pytest.param(
            [("1.6.20~ds1", "double-del", "removed", "removed"),
             ("1.6.20~ds1", "del-error-propagates", "removed", "removed")], 0,
            ["nothing stuck, with or without", "DELs kept from the delegate: none",
             "measured: 1.6.20~ds1"],
            id="thick-nothing-stuck"),
        pytest.param(
            [("1.6.20~ds1", "double-del", "stuck", "stuck")], None,
            ["stuck either way: double-del", "DELs kept from the delegate: not counted",
             "measured: 1.6.20~ds1"],
            id="thin-path-double-del"),
        pytest.param(
            [("1.6.20~ds1", "double-del", "removed", "stuck"),
             ("1.6.20~ds1", "del-error-propagates", "error-returned", "removed")], 0,
            [f"{verdict.WORSE_MARK}: double-del",
             "changes: del-error-propagates (error-returned → removed)",
             "DELs kept from the delegate: none", "measured: 1.6.20~ds1"],
            id="worse-and-changed"),
    ],
)
def test_lines(cases: list[tuple[str, str, str, str]], kept: int | None,
               expected: list[str]) -> None:
    v = verdict.verdict(rows(*cases, kept=kept), BEFORE, "fake-stateful")
    assert verdict.lines(v) == expected


def test_every_scenario_is_a_situation_a_user_names() -> None:
    assert set(verdict.KINDS) == set(matrix.SCENARIOS)


@pytest.mark.parametrize(
    ("cases", "said"),
    [
        pytest.param([("v2.1.6", "double-del", "removed", "removed")],
                     ["nothing stuck, with or without"], id="nothing"),
        pytest.param([("v2.1.6", "double-del", "stuck", "removed"),
                      ("v2.1.6", "installer", "stuck", "removed"),
                      ("v2.1.6", "reboot", "stuck", "removed")],
                     [f"stuck → freed: {verdict.DELETED}; {verdict.DISRUPTED}"], id="freed-once"),
        pytest.param([("v2.1.6", "completed-del-fails", "stuck", "stuck"),
                      ("v2.1.6", "release", "stuck", "released")],
                     [f"stuck either way: {verdict.DEL_FAILS} (`cni-delguard release` frees it)"],
                     id="valve"),
        pytest.param([("v2.1.6", "completed-del-fails", "stuck", "stuck")],
                     [f"stuck either way: {verdict.DEL_FAILS}"], id="no-valve-run"),
        pytest.param([("v2.1.6", "reboot", "removed", "stuck")],
                     [f"{verdict.WORSE_MARK}: {verdict.DISRUPTED}"], id="worse"),
        pytest.param([("1.6.20", "reboot", "stuck", "removed"),
                      ("v1.6.22", "reboot", "removed", "removed")],
                     [f"differs by version or run: {verdict.DISRUPTED}"], id="disagree"),
    ],
)
def test_brief(cases: list[tuple[str, str, str | None, str | None]], said: list[str]) -> None:
    where = ranges.Range("any", "containerd", "any", (((0, 0, 0), None),))
    assert verdict.brief(verdict.verdict(rows(*cases), where, "fake-stateful")) == said


def test_brief_says_when_dels_were_kept_and_when_nothing_ran() -> None:
    kept = rows(("v2.1.6", "double-del", "removed", "removed"), kept=1)
    assert verdict.brief(verdict.verdict(kept, AFTER, "fake-stateful"))[-1] == (
        "keeps stale DELs from the delegate")
    assert verdict.brief(verdict.verdict([], AFTER, "fake-stateful")) == ["not measured"]
