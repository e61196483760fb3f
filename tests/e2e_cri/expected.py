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
# Either side of containerd's CNIResult check (runtimes.BOUNDARY; matrix_chains.BOUNDARY: the
# cases it decides): 1.7.22, the last 1.7 without it, deadlocks as 1.6.20 does; 1.6.38, a 1.6 with
# it, removes a stale sandbox as 1.7.35 and 2.1.6 do: measured, as predicted from the source.
BOUNDARY_FAKE = ("double-del", *STALE)
EXPECTED |= {("containerd-1.7.22", s): o
             for s, o in (STALE_DEADLOCKS | COMPLETED).items() if s in BOUNDARY_FAKE}
EXPECTED |= {("containerd-1.6.38", s): o
             for s, o in (STALE_REMOVED | COMPLETED).items() if s in BOUNDARY_FAKE}
CONTAINERDS = ("containerd-1.6", "containerd-1.7", "containerd-2.1")
# The real multus chains (tests/e2e_cri/matrix_chains.py: the scenarios each runs), behind which
# kube-ovn's DEL succeeds whenever its config has `server_socket` (it holds state or not).
MULTUS: dict[str, dict[str, tuple[str, str]]] = {
    # Differs from BACKGROUND.md, which says the double DEL is stuck through multus: multus
    # v4.3.0 without its cache hands kube-ovn its inline config whole (the pod is in the API), and
    # kube-ovn's DEL succeeds. With its cache on disk (written before ADD) the same goes for a
    # sandbox stale after a reboot, on 1.6.20 too.
    "multus-thin": {
        "double-del": ("removed", "removed"),
        "reboot": ("removed", "removed"),
        "del-error-propagates": ("error-returned", "error-returned"),
    },
    # Every DEL loses `server_socket` (multus issue 1449): the first DEL of a completed ADD fails,
    # so the guard (which has the ADD's evidence) forwards it and is stuck too; a stale sandbox
    # (1.6.20) is freed by it, a completed one by `release`.
    "multus-thin-path": {
        "double-del": ("stuck", "stuck"),
        "reboot": ("stuck", "removed"),
        "release": ("stuck", "released"),
    },
    # The shim answers 0 to every DEL: nothing is stuck, and a delegate's DEL error never comes
    # back to the runtime, with or without the guard (del-error-propagates: removed). After a
    # reboot the daemon is not back yet when the stale sandbox's DELs come: the shim cannot reach
    # it, logs so and answers 0 (kube-ovn never hears of them), so the sandbox goes on 1.6.20 too.
    "multus-thick": {
        "double-del": ("removed", "removed"),
        "reboot": ("removed", "removed"),
        "del-error-propagates": ("removed", "removed"),
    },
}
BY_CHAIN: dict[tuple[str, str, str], tuple[str, str]] = {
    (runtime, chain, scenario): outcome
    for chain, rows in MULTUS.items() for scenario, outcome in rows.items()
    for runtime in CONTAINERDS
}
# On 1.7.35 and 2.1.6 a sandbox without a CNI result is removed whatever its DEL does (above).
BY_CHAIN |= {(runtime, "multus-thin-path", "reboot"): ("removed", "removed")
             for runtime in ("containerd-1.7", "containerd-2.1")}
# And either side of the check: 1.7.22 as 1.6.20, 1.6.38 as 1.7.35.
BY_CHAIN |= {
    ("containerd-1.7.22", "multus-thin-path", "reboot"): ("stuck", "removed"),
    ("containerd-1.6.38", "multus-thin-path", "reboot"): ("removed", "removed"),
}
# CRI-O marks the network torn down even when DEL fails: nothing through multus is stuck there.
BY_CHAIN |= {
    ("cri-o-1.36", "multus-thin", "double-del"): ("removed", "removed"),
    ("cri-o-1.36", "multus-thin", "reboot"): ("removed", "removed"),
    ("cri-o-1.36", "multus-thin", "del-error-propagates"): ("error-returned", "error-returned"),
    ("cri-o-1.36", "multus-thin-path", "double-del"): ("removed", "removed"),
    ("cri-o-1.36", "multus-thin-path", "reboot"): ("removed", "removed"),
    ("cri-o-1.36", "multus-thin-path", "release"): ("removed", "removed"),
    ("cri-o-1.36", "multus-thick", "double-del"): ("removed", "removed"),
    ("cri-o-1.36", "multus-thick", "reboot"): ("removed", "removed"),
    ("cri-o-1.36", "multus-thick", "del-error-propagates"): ("removed", "removed"),
}


def expected(runtime: str, delegate: str, scenario: str, guarded: bool) -> str:
    if delegate == "fake-stateful":
        return EXPECTED[(runtime, scenario)][guarded]
    pair = BY_CHAIN[(runtime, delegate, scenario)]
    return pair[guarded]


# The reported stack (tests/e2e_cri/reported.py, the Cozystack chain): (scenario, runtime key) ->
# (outcome without the guard, outcome with it), for multus v4.2.3 on every containerd and v4.3.0
# on 2.1.6. Nothing stays stuck: through multus thick every DEL gets the shim's 0 once its daemon
# is back (kube-ovn's DEL, stripped of `server_socket`, never reaches its daemon: issue 1449), and
# the windows where the runtime runs 05-cilium.conflist directly, or kube-ovn's daemon is down,
# last only as long as those daemons are away. The guard changes no outcome.
# cilium-cni changes none either, measured: libcni runs a list's DELs last plugin first, so its
# DEL comes before kube-ovn's and succeeds whether its agent is up (200, or 404 for an endpoint
# already gone: both success, plugins/cilium-cni/lib/deletion_queue.go and chaining/generic-veth at
# v1.19.1) or away (queued, a success); an agent booting after a power-off is back within the
# plugin's own waits (its client's connect, then the queue's lock, then a second connect), so the
# DEL goes through the API, and a new ADD waits for the agent rather than failing. The seconds
# grow by the agent's boot (CILIUM_BOOT in tests/support/reported_stack.py).
REPORTED: dict[tuple[str, str], tuple[str, str]] = {
    (scenario, runtime): ("removed", "removed")
    for scenario in ("double-del", "reboot", "kube-ovn-down-at-boot", "multus-restart",
                     "reboot-20-pods")
    for runtime in (*CONTAINERDS, "cri-o-1.36")
}
# Except on CRI-O, measured stuck with and without the guard: a pod deleted while multus's and
# kube-ovn's daemons restart has its DEL go to the network of its ADD, multus-shim, which answers
# 0 with its daemon away, so cilium-agent keeps the old endpoint and refuses the new sandbox its
# IP (kube-ovn gives the same pod the same address) with "IP ... is already in use" (cilium
# v1.19.1 pkg/endpoint/api/endpoint_api_manager.go) within the scenario's bound. cilium's own
# endpoint GC (pkg/endpointmanager, a two-phase mark and sweep on its endpoint-gc-interval)
# would free it later; the stand-in does not model it, so how much later is not measured.
REPORTED[("multus-restart", "cri-o-1.36")] = ("stuck", "stuck")
# kube-ovn's own clean-up frees its port and the pod's IP (the lifetimes are the run's facts):
# measured on the reported runtime row alone.
REPORTED[("kube-ovn-lifetimes", "containerd-2.1")] = ("removed", "removed")
REPORTED |= {(s, "containerd-2.1"): ("running", "running")  # tests/e2e_cri/windows.py
             for s in ("go-cni-stall", "stale-conf-power-cut")}


def reported(scenario: str, runtime: str, multus: str, guarded: bool) -> str:
    del multus  # v4.2.3 and v4.3.0 gave the same outcomes in every scenario
    return REPORTED[(scenario, runtime)][guarded]
