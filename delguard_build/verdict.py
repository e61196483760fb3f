"""What the matrix says for one runtime range and one measured chain (pure): the one derivation
behind README's "Does it fix my problem?" table, docs/compatibility.md and the verdicts
`cni-delguard assess` ships (verdicts.py).

Every statement comes from rows: for each scenario, the outcome without the guard and with it on
each version (and driver) of the range that ran it. A pair's effect is read off the two outcomes
(EFFECTS); a scenario whose pairs disagree between versions is said to disagree, with each
version's pair, never averaged. A range and chain with no row is unmeasured. Nothing is inferred
from a version that did not run: the verdict names the versions it rests on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from delguard_build import matrix, ranges

# The effect of the guard on one scenario, from (outcome without, outcome with).
FREED = "freed"  # stuck without, removed with: the guard frees it
RELEASE = "needs-release"  # stuck either way, removed after `cni-delguard release`
STUCK = "stuck-either-way"  # stuck without and with
UNCHANGED = "unchanged"  # the same outcome, not stuck
WORSE = "stuck-with-guard-only"  # not stuck without, stuck with: must never be
CHANGED = "changed"  # another difference (a DEL error no longer returned, ...)
HALF = "half-measured"  # only one of the two runs is in the matrix
DISAGREE = "disagree"  # the versions (or drivers) of the range differ
EFFECTS = (FREED, RELEASE, STUCK, UNCHANGED, WORSE, CHANGED, HALF, DISAGREE)
WORSE_MARK = "STUCK ONLY WITH IT"  # the line a page shows in bold

# What a user calls the situation of each scenario: README's short table names these, the full
# verdict (lines()) the scenarios themselves. Every scenario has one (tests/unit).
DELETED = "a deleted pod"
DISRUPTED = "after a reboot or a crash"
FAILED_ADD = "after a failed or timed-out ADD"
DEL_FAILS = "a DEL that keeps failing after a completed ADD"
DEL_ERROR = "a DEL error the runtime must see"
SLOW_ADD = "an ADD that takes minutes"
KINDS = {
    "double-del": DELETED, "installer": DELETED, "multus-restart": DELETED,
    "kube-ovn-ovsdb-down-del": DELETED,
    "kube-ovn-lifetimes": DELETED,
    "kill-mid-add": DISRUPTED, "reboot": DISRUPTED, "reboot-20-pods": DISRUPTED,
    "kube-ovn-down-at-boot": DISRUPTED, "stale-conf-power-cut": DISRUPTED,
    "add-fails": FAILED_ADD, "client-deadline": FAILED_ADD,
    "completed-del-fails": DEL_FAILS, "release": DEL_FAILS,
    "del-error-propagates": DEL_ERROR,
    "go-cni-stall": SLOW_ADD,
    "slow-add-150s": SLOW_ADD, "slow-add-200s": SLOW_ADD, "slow-add-230s": SLOW_ADD,
}


def effect(without: str | None, with_guard: str | None) -> str:
    if without is None or with_guard is None:
        return HALF
    if without == "stuck":
        return {"removed": FREED, "released": RELEASE, "stuck": STUCK}.get(with_guard, CHANGED)
    if with_guard == "stuck":
        return WORSE
    return UNCHANGED if with_guard == without else CHANGED


@dataclass(frozen=True)
class Pair:
    """One scenario on one version and driver: the outcomes without and with the guard."""

    version: str
    driver: str
    without: str | None
    with_guard: str | None
    kept: int | None  # DELs the guard answered without the delegate (None: not counted)
    kubernetes: str | None = None  # the kubelet's release, where a kubelet drove it

    @property
    def effect(self) -> str:
        return effect(self.without, self.with_guard)

    @property
    def where(self) -> str:
        """`1.6.20`, `2.1.6 kubelet`, `2.1.6 kubelet v1.37.2`: what ran it."""
        driver = "" if self.driver == "cri" else f" {self.driver}"
        return f"{self.version}{driver}{' ' + self.kubernetes if self.kubernetes else ''}"


@dataclass(frozen=True)
class Scenario:
    name: str
    pairs: tuple[Pair, ...]

    @property
    def effect(self) -> str:
        """The pairs' one effect; DISAGREE when they differ. A run of one side only (the
        kubelet's release, say) counts as agreeing when its outcome is one the full pairs had
        on that side; with no full pair at all, HALF."""
        full = [p for p in self.pairs if p.effect != HALF]
        if not full:
            return HALF
        found = {p.effect for p in full}
        withouts, withs = {p.without for p in full}, {p.with_guard for p in full}
        for p in self.pairs:
            if p.effect == HALF and not (p.without in withouts or p.with_guard in withs):
                return DISAGREE
        return found.pop() if len(found) == 1 else DISAGREE

    @property
    def stuck_without(self) -> bool:
        return any(p.without == "stuck" for p in self.pairs)

    @property
    def kept(self) -> bool | None:
        """Whether the guard kept a DEL from the delegate here (None: never counted)."""
        counted = [p.kept for p in self.pairs if p.kept is not None]
        return any(counted) if counted else None


@dataclass(frozen=True)
class Verdict:
    """What the matrix says for one range and one chain."""

    range: ranges.Range
    chain: str
    versions: tuple[str, ...]  # the versions of the range the chain ran on, oldest first
    scenarios: tuple[Scenario, ...]  # in the matrix's scenario order

    @property
    def measured(self) -> bool:
        return bool(self.scenarios)

    def named(self, *effects: str) -> list[str]:
        return [s.name for s in self.scenarios if s.effect in effects]

    @property
    def stuck_without(self) -> list[str]:
        return [s.name for s in self.scenarios if s.stuck_without]

    @property
    def kept(self) -> list[str] | None:
        """Scenarios where the guard kept a DEL from the delegate; None: never counted."""
        marks = [(s.name, s.kept) for s in self.scenarios if s.kept is not None]
        return [name for name, kept in marks if kept] if marks else None


def verdict(rows: Iterable[matrix.Row], where: ranges.Range, chain: str) -> Verdict:
    """The verdict of `chain` in `where` from the matrix's rows (either driver)."""
    mine = [r for r in rows if r.chain == chain and where.holds(r.runtime, r.version)]
    by_case: dict[tuple[str, str, str, str], dict[bool, matrix.Row]] = {}
    for r in mine:
        by_case.setdefault((r.scenario, r.version, r.driver, r.kubernetes or ""), {})[r.guard] = r
    scenarios = []
    for name in matrix.SCENARIOS:
        cases = sorted((k for k in by_case if k[0] == name),
                       key=lambda k: (ranges.sort_key(k[1]), k[1], matrix.DRIVERS.index(k[2]),
                                      ranges.sort_key(k[3]), k[3]))
        pairs = []
        for key in cases:
            runs = by_case[key]
            without, with_guard = runs.get(False), runs.get(True)
            pairs.append(Pair(key[1], key[2], without.outcome if without else None,
                              with_guard.outcome if with_guard else None,
                              with_guard.kept if with_guard else None, key[3] or None))
        if pairs:
            scenarios.append(Scenario(name, tuple(pairs)))
    versions = tuple(sorted({r.version for r in mine}, key=lambda v: (ranges.sort_key(v), v)))
    return Verdict(where, chain, versions, tuple(scenarios))


def pair_text(pair: Pair) -> str:
    return f"{pair.without or 'not run'} → {pair.with_guard or 'not run'}"


def disagreement(scenario: Scenario) -> str:
    """`reboot (1.6.20: stuck → removed; v1.7.22: removed → removed)`."""
    parts = [f"{p.where}: {pair_text(p)}" for p in scenario.pairs]
    return f"{scenario.name} ({'; '.join(parts)})"


def lines(v: Verdict) -> list[str]:
    """The verdict in short lines, most important first: what the guard frees, what stays stuck
    either way (and whether the release valve frees it), what else changes, where versions
    disagree, the DELs it keeps from the delegate, the versions it rests on. The cell of
    README's table and assess's text (plain: a page adds its own emphasis)."""
    if not v.measured:
        return ["not measured"]
    out = []
    for effect_, said in ((FREED, "stuck → freed"), (STUCK, "stuck either way"),
                          (RELEASE, "stuck → freed by `cni-delguard release`"),
                          (WORSE, WORSE_MARK)):
        names = v.named(effect_)
        if names:
            out.append(f"{said}: {', '.join(names)}")
    changed = [s for s in v.scenarios if s.effect == CHANGED]
    if changed:
        out.append("changes: " + ", ".join(f"{s.name} ({pair_text(s.pairs[0])})"
                                           for s in changed))
    odd = [s for s in v.scenarios if s.effect == DISAGREE]
    if odd:
        out.append("versions disagree: " + ", ".join(disagreement(s) for s in odd))
    if not v.stuck_without and not v.named(WORSE, DISAGREE):
        out.append("nothing stuck, with or without")
    kept = v.kept
    if kept is None:
        out.append("DELs kept from the delegate: not counted")
    else:
        out.append(f"DELs kept from the delegate: {'in ' + ', '.join(kept) if kept else 'none'}")
    half = v.named(HALF)
    if half:
        out.append(f"run one way only: {', '.join(half)}")
    out.append(f"measured: {', '.join(v.versions)}")
    return out


def kinds(names: Iterable[str]) -> str:
    """The situations of these scenarios, each once, in KINDS's order."""
    found = {KINDS[n] for n in names}
    return "; ".join(k for k in dict.fromkeys(KINDS.values()) if k in found)


KEEPS = "keeps stale DELs from the delegate"


def brief(v: Verdict) -> list[str]:
    """The verdict as a newcomer reads it: which situations the guard frees, which stay stuck
    either way, anything it makes worse or where versions differ (the full verdict then says
    which: lines()), and whether it keeps DELs from the delegate. README's short table."""
    if not v.measured:
        return ["not measured"]
    out = []
    if freed := v.named(FREED):
        out.append(f"stuck → freed: {kinds(freed)}")
    if stuck := v.named(STUCK, RELEASE):
        valve = " (`cni-delguard release` frees it)" if v.named(RELEASE) else ""
        out.append(f"stuck either way: {kinds(stuck)}{valve}")
    if worse := v.named(WORSE):
        out.append(f"{WORSE_MARK}: {kinds(worse)}")
    if other := v.named(CHANGED, DISAGREE):
        out.append(f"differs by version or run: {kinds(other)}")
    if not v.stuck_without and not v.named(WORSE, DISAGREE):
        out.append("nothing stuck, with or without")
    if v.kept:
        out.append(KEEPS)
    return out
