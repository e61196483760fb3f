"""What each runtime did in each scenario of the matrix, as measured here: the suite's reference.

test_matrix.py fails when a run's outcome differs from this table, so a runtime, chain or guard
that changes behaviour is noticed. It is measured, not wished for: where it differs from what
shared/BACKGROUND.md says, the comment beside the row says so. Other tests ask it which runtimes
show a behaviour (test_adoption.py runs only where a failed ADD deadlocks without the guard).
"""

from __future__ import annotations

# (runtime key, scenario): (outcome without the guard, outcome with it), for the fake-stateful
# chain; a chain whose outcomes differ adds its rows to BY_CHAIN.
STALE = ("kill-mid-add", "reboot", "add-fails", "client-deadline")
STALE_DEADLOCKS = dict.fromkeys(STALE, ("stuck", "removed"))
STALE_REMOVED = dict.fromkeys(STALE, ("removed", "removed"))
COMPLETED = {
    "double-del": ("stuck", "removed"),  # every containerd runs DEL again at Remove
    "completed-del-fails": ("stuck", "stuck"),  # strict: skipping it would leak the ADD's state
    "release": ("stuck", "released"),
    "del-error-propagates": ("error-returned", "error-returned"),
}
EXPECTED: dict[tuple[str, str], tuple[str, str]] = {
    **{("containerd-1.6", s): o for s, o in (STALE_DEADLOCKS | COMPLETED).items()},
    # 1.7.35 and 2.1.6 skip, or run and ignore, the DEL of a sandbox without a CNI result.
    **{("containerd-1.7", s): o for s, o in (STALE_REMOVED | COMPLETED).items()},
    **{("containerd-2.1", s): o for s, o in (STALE_REMOVED | COMPLETED).items()},
    **{("cri-o-1.36", s): o for s, o in (STALE_REMOVED | {
        "double-del": ("removed", "removed"),
        "completed-del-fails": ("removed", "removed"),
        "release": ("removed", "removed"),
        "del-error-propagates": ("error-returned", "error-returned"),
    }).items()},
}
BY_CHAIN: dict[tuple[str, str, str], tuple[str, str]] = {}


def expected(runtime: str, delegate: str, scenario: str, guarded: bool) -> str:
    pair = BY_CHAIN.get((runtime, delegate, scenario)) or EXPECTED[(runtime, scenario)]
    return pair[guarded]
