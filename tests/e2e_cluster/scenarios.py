"""The cluster scenarios of issue 36, each on a cluster of its own (site.py), side by side.

A scenario does what a user or the machine does (helm, kubectl, a power cut) and then watches
what the cluster does by itself. It ends with evidence (Evidence) that the tests assert on, and
the reboot and double-del scenarios record matrix rows (driver "cluster").

Verdicts, the matrix's words (as the kubelet suite's): "removed" every stale sandbox gone and
every pod that should run Ready; "stuck" a stale sandbox still there after STORM_PERIODS of the
kubelet's GC periods with the runtime's failures in the kubelet's log (and, where the GC is what
fails, after as many failed passes: tests/e2e_kubelet/kubelet.py gc_verdict).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.e2e_cluster import install, publish, workloads
from tests.e2e_cluster.site import (
    DELEGATE,
    READY_BOUND,
    Cluster,
    Release,
    Shared,
    cluster,
    elapsed,
    hang_file,
    skip_or_fail,
)
from tests.e2e_cri.runtimes import Runtime
from tests.e2e_kubelet.kubelet import (
    DESTROY_FAILED,
    GC_PERIOD,
    GC_STOP_FAILED,
    NEWEST,
    STORM_PERIODS,
    VERSION,
    wait_gc_verdict,
)
from tests.e2e_kubelet.runtimes import RUNTIMES
from tests.support.evidence import QUOTE, KubeletEvidence, quote
from tests.support.waiting import wait_for

VERDICT_BOUND = GC_PERIOD * (STORM_PERIODS + 4)
SETUP_FAILED = "failed to setup network for sandbox"
REPLICAS = 10


class Evidence(KubeletEvidence):
    """What one run saw on the cluster: its verdict and the facts the tests check."""

    chain = DELEGATE
    driver = "cluster"
    kept = "cluster"
    release = VERSION


# --- the guard, as users install it ------------------------------------------------------------


def guard_by_chart(c: Cluster, ev: Evidence, wrap: str | None = "stale-delegate") -> Release:
    """The first release's chart installed; its pod Ready means the node is guarded."""
    first, _ = c.shared.releases()
    c.publish(first)
    install.helm_install(c, first, wrap=wrap)
    install.rollout(c)
    wait_for(c.wrapped, "the installer to wrap the conf", timeout=READY_BOUND, every=1)
    ev.facts["wrapped"] = True
    return first


def wait_verdict(c: Cluster, gone: Callable[[], bool], subjects: set[str], since: float) -> str:
    """kubelet.gc_verdict on this cluster's node, polled until it has one."""
    return wait_gc_verdict(c.kubelet, c.sandbox_ids, gone, subjects, since,
                           timeout=VERDICT_BOUND, every=3)


def gather(c: Cluster, ev: Evidence, subjects: set[str]) -> None:
    ev.dels = sum(len(c.fake.calls("DEL", sid)) for sid in subjects)
    ev.gc_failures = sum(len(c.kubelet.log_lines(sid, GC_STOP_FAILED))
                         for sid in subjects)
    for sid in sorted(subjects)[:2]:
        ev.kubelet += quote(c.kubelet.log_lines(sid, DESTROY_FAILED), 1)
        ev.containerd += quote(c.containerd_lines(sid, DESTROY_FAILED), 1)


# --- 1. a Deployment's pods deleted with kubectl ----------------------------------------------


def double_del(c: Cluster, ev: Evidence) -> None:
    """10 pods Ready, `kubectl delete pod` of each: the ReplicaSet replaces them; each old
    sandbox is stopped (DEL 1, the delegate forgets it) and then removed by the GC (DEL 2).
    seconds: the deletions to the verdict."""
    if ev.guard:
        guard_by_chart(c, ev)
    c.kube.apply(workloads.deployment("dd", REPLICAS))
    pods = c.wait_pods_ready(REPLICAS, "app=dd")
    old = {s.id for s in c.sandboxes_of(workloads.APP_NAMESPACE)}
    since = time.monotonic()
    for pod in pods:
        c.kube.run("-n", workloads.APP_NAMESPACE, "delete", "pod", pod["metadata"]["name"],
                   "--wait=false")
    c.wait_pods_ready(REPLICAS, "app=dd")
    ev.facts["replaced_ready"] = elapsed(since)
    ev.outcome = wait_verdict(c, lambda: not old & c.sandbox_ids(), old, since)
    ev.seconds = elapsed(since)
    ev.facts["left"] = len(old & c.sandbox_ids())
    gather(c, ev, old)
    ev.record("double-del")


# --- 2. a hard reboot while the pods are being created ----------------------------------------


def reboot(c: Cluster, ev: Evidence) -> None:
    """The CSI plugin's DaemonSet and a Deployment of 10 pods that wait for its socket are
    created while every ADD hangs; the node loses power; it boots with the delegate healthy.
    seconds: power-on to the verdict; facts["all_ready"]: power-on to every pod Ready."""
    if ev.guard:
        guard_by_chart(c, ev)
    c.kube.apply(workloads.csi_daemonset(), workloads.deployment("app", REPLICAS,
                                                                 needs_csi=True))
    want = REPLICAS + 1
    hung = wait_for(lambda: _hung(c, want), f"{want} ADDs to hang", timeout=READY_BOUND,
                    every=1, detail=c.kubelet.log_tail)
    c.power_off()
    hang_file(c.node).unlink()  # the delegate is healthy after the boot
    since = time.monotonic()
    c.boot()
    ev.facts["stale_after_boot"] = len(hung & c.sandbox_ids())
    ready_at: list[float] = []

    def gone() -> bool:
        ready = _all_ready(c, want)
        if ready and not ready_at:
            ready_at.append(elapsed(since))
        return ready and not hung & c.sandbox_ids()

    ev.outcome = wait_verdict(c, gone, hung, since)
    ev.seconds = elapsed(since)
    ev.facts["all_ready"] = ready_at[0] if ready_at else None
    ev.facts["ready_pods"] = sum(workloads.is_ready(p) for p in c.pods())
    gather(c, ev, hung)
    ev.record("reboot")


def _hung(c: Cluster, want: int) -> set[str] | None:
    started = {call["containerID"] for call in c.fake.calls("ADD")}
    return started if len(started) >= want else None


def _all_ready(c: Cluster, want: int) -> bool:
    pods = [p for p in c.pods() if not p["metadata"].get("deletionTimestamp")]
    return len(pods) == want and all(workloads.is_ready(p) for p in pods)


# --- 3. the chart's life: dry-run, Pod Security, install, upgrade, rollback, uninstall ---------


def chart_life(c: Cluster, ev: Evidence) -> None:
    first, second = c.shared.releases()
    # Published, verified as a user verifies it, and what a user must not install refused.
    ev.facts["verified"] = {r.version: c.publish(r) for r in (first, second)}
    ev.facts["refused"] = publish.refusals(c, first)
    original = c.conflist.read_bytes()
    bin_before = install.bin_listing(c)

    # --dry-run=server: the API server validates and admits every object, nothing is created.
    dry = install.helm_install(c, first, "--dry-run=server")
    ev.facts["dry_run_kinds"] = sorted({line.split(":", 1)[1].strip()
                                        for line in dry.stdout.splitlines()
                                        if line.startswith("kind:")})
    ev.facts["dry_run_left_nothing"] = not c.kube.items("daemonsets", "-A",
                                                        "-l", "app.kubernetes.io/name=cni-delguard")

    pod_security(c, ev, first)

    install.helm_install(c, first)
    ev.facts["rollout"] = install.rollout(c).strip().splitlines()[-1:]
    wait_for(c.wrapped, "the installer to wrap the conf", timeout=READY_BOUND, every=1)
    ev.facts["wrapped"] = c.wrapped()
    ready = install.ready_in_pod(c)
    ev.facts["ready_exec"] = {"code": ready.returncode,
                              "said": (ready.stdout + ready.stderr).strip()[-QUOTE:]}
    text = wait_for(lambda: _scrape_or_none(c), "the metrics endpoint", timeout=READY_BOUND,
                    every=2)
    ev.facts["metrics_series"] = sorted({line.split("{")[0].split()[0]
                                         for line in text.splitlines()
                                         if line.startswith("cni_delguard_")})
    ev.facts["bundles_v1"] = install.bundle_dirs(c)
    ev.facts["link_v1"] = install.link_target(c)
    ev.facts["guard_entry"] = install.guard_entry(c)
    ev.facts["template"] = server_template(c)

    upgrade_under_load(c, ev, second)

    c.helm.run("rollback", install.RELEASE, "1", "--namespace", install.NAMESPACE, "--wait",
               "--timeout", install.ROLLOUT_BOUND)
    install.rollout(c)
    wait_for(lambda: install.link_target(c) == ev.facts["link_v1"],
             "the rollback's installer to switch back to the first version", timeout=300,
             every=1)
    ev.facts["rollback_wrapped"] = c.wrapped()
    ev.facts["bundles_rollback"] = install.bundle_dirs(c)

    # The chart's uninstall mode (NOTES.txt, docs/install.md): hold, wait, uninstall.
    c.helm.run("upgrade", install.RELEASE, *install.chart_ref(first), "--namespace",
               install.NAMESPACE,
               "--reuse-values", "--set", "cni.hold=true", "--wait", "--timeout",
               install.ROLLOUT_BOUND)
    install.rollout(c)
    c.helm.run("uninstall", install.RELEASE, "--namespace", install.NAMESPACE, "--wait")
    wait_for(lambda: not c.pods(install.NAMESPACE, "app.kubernetes.io/name=cni-delguard"),
             "the installer pods to go", timeout=READY_BOUND, every=2)
    ev.facts["restored"] = c.conflist.read_bytes() == original
    ev.facts["bin_left"] = sorted(set(install.bin_listing(c)) - set(bin_before))
    ev.outcome = "done"


def pod_security(c: Cluster, ev: Evidence, release: Release) -> None:
    """The chart into a namespace that enforces baseline: refused, and nothing created."""
    ns = "guard-baseline"
    c.kube.apply(workloads.namespace(ns, {"pod-security.kubernetes.io/enforce": "baseline"}))
    out = install.helm_install(c, release, namespace=ns, check=False)
    ev.facts["psa_code"] = out.returncode
    ev.facts["psa_said"] = out.stderr.strip()[-1500:]
    ev.facts["psa_left"] = [o["kind"] + "/" + o["metadata"]["name"] for o in
                            c.kube.items("daemonsets,pods,secrets", "-n", ns)
                            if o["kind"] != "Secret" or "helm" in o.get("type", "")]
    # The same DaemonSet applied without the chart's check: what the user meets otherwise.
    docs = c.helm.run("template", install.RELEASE, *install.chart_args(release), "--namespace",
                      ns).stdout
    applied = c.kube.run("apply", "-f", "-", stdin=docs, check=False)
    ev.facts["psa_without_check"] = (applied.stdout + applied.stderr).strip()[-1500:]
    events = wait_for(lambda: [e["message"] for e in c.kube.items("events", "-n", ns)
                               if e.get("reason") == "FailedCreate"],
                      "the DaemonSet controller's FailedCreate", timeout=300, every=2)
    ev.facts["psa_failed_create"] = events[0][:QUOTE]
    c.kube.run("delete", "namespace", ns, "--wait=false")


def server_template(c: Cluster) -> dict[str, Any]:
    """The DaemonSet's pod template as the API server stored it (its defaults filled in)."""
    ds = c.kube.get("-n", install.NAMESPACE, "daemonset", "cni-delguard")
    template: dict[str, Any] = ds["spec"]["template"]
    return template


def upgrade_under_load(c: Cluster, ev: Evidence, second: Release) -> None:
    """`helm upgrade` to the second release while pods are created and deleted in a loop; the
    conf sampled all along; the failures of ADD and DEL the runtime logged, counted."""
    mark = len(c.node.log_text())
    kubelet_mark = len(c.kubelet.log_text())
    stop = threading.Event()
    samples = {"wrapped": 0, "unwrapped": 0}
    churn: dict[str, Any] = {"cycles": 0, "failures": []}

    def sample() -> None:
        while not stop.is_set():
            samples["wrapped" if c.wrapped() else "unwrapped"] += 1
            time.sleep(0.05)

    def loop(worker: int) -> None:
        i = 0
        while not stop.is_set():
            name = f"churn-{worker}-{i}"
            i += 1
            try:
                c.kube.apply(workloads.plain_pod(name))
                wait_for(lambda n=name: _pod_ready(c, n), f"{name} Ready",  # type: ignore[misc]
                         timeout=240, every=1)
                c.kube.run("-n", workloads.APP_NAMESPACE, "delete", "pod", name,
                           "--timeout=240s")
                churn["cycles"] += 1
            except AssertionError as exc:
                churn["failures"].append(f"{name}: {str(exc)[:300]}")

    threads = [threading.Thread(target=sample, daemon=True)]
    threads += [threading.Thread(target=loop, args=(w,), daemon=True) for w in range(3)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: churn["cycles"] >= 3, "the churn to run", timeout=READY_BOUND, every=1)
        before = churn["cycles"]
        since = time.monotonic()
        c.helm.run("upgrade", install.RELEASE, *install.chart_args(second), "--namespace",
                   install.NAMESPACE, "--wait", "--timeout", install.ROLLOUT_BOUND)
        install.rollout(c)
        wait_for(lambda: install.link_target(c) != ev.facts["link_v1"],
                 "the new installer to switch versions", timeout=300, every=1)
        ev.facts["upgrade_seconds"] = elapsed(since)
        ev.facts["bundles_v2"] = install.bundle_dirs(c)
        # Keep churning a while after the switch: the old version's processes finish.
        wait_for(lambda: churn["cycles"] >= before + 6, "more churn after the upgrade",
                 timeout=READY_BOUND, every=1)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=300)
    log = c.node.log_text()[mark:]
    klog = c.kubelet.log_text()[kubelet_mark:]
    failures = [line for line in log.splitlines() if SETUP_FAILED in line or DESTROY_FAILED in line]
    ev.facts["upgrade"] = {
        "cycles": churn["cycles"], "churn_failures": churn["failures"][:5],
        "runtime_cni_failures": len(failures), "quoted": quote(failures),
        "kubelet_sandbox_failures": sum("CreatePodSandbox" in line and "rror" in line
                                        for line in klog.splitlines()),
        "samples": dict(samples)}


def _pod_ready(c: Cluster, name: str) -> bool:
    out = c.kube.run("-n", workloads.APP_NAMESPACE, "get", "pod", name, "-o", "json",
                     check=False)
    return out.returncode == 0 and workloads.is_ready(json.loads(out.stdout))


# --- 4. the kustomize overlays ----------------------------------------------------------------


def kustomize(c: Cluster, ev: Evidence) -> None:
    """`kubectl apply -k` of the watch overlay, then of the monitoring overlay (its PodMonitor
    and PrometheusRule need prometheus-operator's CRDs: crds.py), then the uninstall overlay."""
    first, _ = c.shared.releases()
    c.publish(first)
    original = c.conflist.read_bytes()
    c.kube.run("apply", "-k", str(install.kustomize_dir(c, "watch", first)))
    ev.facts["rollout"] = install.rollout(c).strip().splitlines()[-1:]
    wait_for(c.wrapped, "the installer to wrap the conf", timeout=READY_BOUND, every=1)
    ev.facts["wrapped"] = c.wrapped()
    ready = install.ready_in_pod(c)
    ev.facts["ready_exec"] = {"code": ready.returncode,
                              "said": (ready.stdout + ready.stderr).strip()[-QUOTE:]}
    from tests.e2e_cluster import crds

    c.kube.apply(*crds.prometheus_operator())
    c.kube.run("wait", "--for=condition=Established", "crd/podmonitors.monitoring.coreos.com",
               "crd/prometheusrules.monitoring.coreos.com", "--timeout=120s")
    applied = c.kube.run("apply", "-k", str(install.kustomize_dir(c, "monitoring", first)))
    ev.facts["monitoring_applied"] = applied.stdout.strip().splitlines()
    install.rollout(c)
    text = wait_for(lambda: _scrape_or_none(c), "the metrics endpoint", timeout=READY_BOUND,
                    every=2)
    ev.facts["metrics_series"] = sorted({line.split("{")[0].split()[0]
                                         for line in text.splitlines()
                                         if line.startswith("cni_delguard_")})
    ev.facts["guard_entry"] = install.guard_entry(c)
    ev.facts["template"] = server_template(c)
    c.kube.run("apply", "-k", str(install.kustomize_dir(c, "uninstall", first)))
    install.rollout(c)
    wait_for(lambda: c.conflist.read_bytes() == original, "the uninstall overlay to restore "
             "the conf", timeout=READY_BOUND, every=1)
    ev.facts["restored"] = True
    ev.outcome = "done"


def _scrape_or_none(c: Cluster) -> str | None:
    try:
        return install.scrape(c)
    except AssertionError:
        return None


# --- 5. multus thick against the real API server ---------------------------------------------

NAD = "extra"


def multus_thick(c: Cluster, ev: Evidence) -> None:
    """multus-daemon (thick) with its service account's token, RBAC and the NAD CRD from its
    own deployment, against the cluster's API server: a pod that asks for a second network by
    a NetworkAttachmentDefinition, Ready, its network-status written back by multus, deleted;
    then the same with the guard installed by the chart in front of multus (found by the
    installer, no --wrap). facts: the daemon's DEL requests for each pod's sandbox."""
    from tests.e2e_cluster.multus_api import RealAPI
    from tests.e2e_cri.node import bridge_prefix
    from tests.support.chains import Behaviour
    from tests.support.multus import CNI_VERSION, MultusThick

    api = RealAPI(c.kube, c.node, c.plane.pki.ca)
    thick = MultusThick(enter=c.node.enter_all, node=c.node.name, api=api,
                        run=c.node.run)
    thick.start(c.node.cni_bin, c.node.tmp / "multus", c.node.cni_cache)
    try:
        c.net.cni_version = CNI_VERSION
        c.net.apply(c.cri, thick.plugins(Behaviour()))
        c.kube.apply({
            "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": NAD, "namespace": workloads.APP_NAMESPACE},
            "spec": {"config": json.dumps({
                "cniVersion": CNI_VERSION, "type": "bridge",
                "bridge": bridge_prefix(c.node.name) + "1",
                "ipam": {"type": "host-local", "subnet": "10.251.76.0/24",
                         "dataDir": str(c.node.tmp / "ipam-extra")}})}})
        ev.facts["without"] = _multus_pod(c, thick, "mt-without")
        guard_by_chart(c, ev, wrap=None)
        ev.facts["with"] = _multus_pod(c, thick, "mt-with")
        ev.outcome = "removed" if all(ev.facts[k]["removed"] for k in ("without", "with")) \
            else "stuck"
    finally:
        thick.stop()


def _multus_pod(c: Cluster, thick: Any, name: str) -> dict[str, Any]:
    pod = workloads.plain_pod(name)
    pod["metadata"]["annotations"] = {"k8s.v1.cni.cncf.io/networks": NAD}
    c.kube.apply(pod)
    wait_for(lambda: _pod_ready(c, name), f"{name} Ready", timeout=READY_BOUND, every=2,
             detail=thick.log_tail)
    got = c.kube.get("-n", workloads.APP_NAMESPACE, "pod", name)
    status = json.loads(got["metadata"].get("annotations", {}).get(
        "k8s.v1.cni.cncf.io/network-status", "[]"))
    (sandbox,) = [s for s in c.sandboxes_of(workloads.APP_NAMESPACE)
                  if s.metadata.name == name]
    since = time.monotonic()
    c.kube.run("-n", workloads.APP_NAMESPACE, "delete", "pod", name, "--wait=false")
    removed = True
    try:
        wait_for(lambda: sandbox.id not in c.sandbox_ids(), f"{name}'s sandbox to go",
                 timeout=GC_PERIOD * 3, every=2, detail=c.kubelet.log_tail)
    except AssertionError:
        removed = False
    return {"networks": [s.get("name") for s in status], "removed": removed,
            "seconds": elapsed(since), "daemon_dels": thick.requests("DEL", sandbox.id),
            "daemon_adds": thick.requests("ADD", sandbox.id)}


# --- 6. what a user sees on a healthy node, the guard in observe mode -------------------------


def observe(c: Cluster, ev: Evidence) -> None:
    """The chart in observe mode in front of Debian's bridge (no fault anywhere), a Deployment
    of 3 pods, each deleted with kubectl and replaced: then what the docs show a user, as the
    tools print it: the installer's log, `doctor` and `stats` run in its pod."""
    first, _ = c.shared.releases()
    c.publish(first)
    install.helm_install(c, first, "--set", "mode=observe", wrap="bridge")
    install.rollout(c)
    wait_for(c.wrapped, "the installer to wrap the conf", timeout=READY_BOUND, every=1)
    ev.facts["mode"] = install.guard_entry(c).get("mode")
    c.kube.apply(workloads.deployment("ob", 3))
    pods = c.wait_pods_ready(3, "app=ob")
    old = {s.id for s in c.sandboxes_of(workloads.APP_NAMESPACE)}
    for pod in pods:
        c.kube.run("-n", workloads.APP_NAMESPACE, "delete", "pod", pod["metadata"]["name"])
    c.wait_pods_ready(3, "app=ob")
    wait_for(lambda: not old & c.sandbox_ids(), "the kubelet to remove the old sandboxes",
             timeout=VERDICT_BOUND, every=3, detail=c.kubelet.log_tail)
    ev.outcome = "removed"
    logs = c.kube.run("-n", install.NAMESPACE, "logs", "ds/cni-delguard")
    ev.facts["logs"] = logs.stdout.splitlines()[:15]
    # assess as README says to run it in the pod: the runtime as the kubelet reports it
    runtime = c.kube.run("get", "nodes", "-o",
                         "jsonpath={.items[0].status.nodeInfo.containerRuntimeVersion}").stdout
    ev.facts["runtime_reported"] = runtime
    for command in (["doctor", "--root", "/host"], ["stats", "--root", "/host", "--since", "1h"],
                    ["assess", "--root", "/host", "--runtime", runtime.strip()]):
        out = c.kube.run("-n", install.NAMESPACE, "exec", "ds/cni-delguard", "--",
                         install.BINARY, *command, check=False)
        ev.facts[command[0]] = {"code": out.returncode, "stdout": out.stdout.splitlines(),
                                "stderr": out.stderr.splitlines()[-5:]}


# --- the runs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    scenario: str
    runtime: Runtime
    guard: bool
    run: Callable[[Cluster, Evidence], None]
    minutes: int
    hang: bool = False  # every ADD hangs until the scenario heals the delegate
    healthy: bool = False  # Debian's bridge alone in the conflist, no stateful fake
    kubernetes: str = VERSION  # the release of its control plane and kubelet

    @property
    def id(self) -> str:
        minor = "" if self.kubernetes == VERSION else f"-kubernetes-{self.kubernetes}"
        return f"{self.runtime.key}-{'with' if self.guard else 'without'}-guard{minor}"


def _runs() -> list[Run]:
    rt = {r.key: r for r in RUNTIMES}
    new = rt["containerd-2.1"]
    table = [Run("chart", new, True, chart_life, 20), Run("kustomize", new, True, kustomize, 10),
             Run("multus-thick", new, True, multus_thick, 8),
             Run("observe", new, True, observe, 6, healthy=True)]
    # double-del: every containerd runs the second DEL (BACKGROUND.md): one runtime shows it.
    table += [Run("double-del", new, g, double_del, 5 if g else 8) for g in (False, True)]
    # reboot: 1.6.20 runs DEL for a sandbox whose ADD never completed, 2.1 does not.
    for runtime in RUNTIMES:
        for g in (False, True):
            table.append(Run("reboot", runtime, g, reboot, 6 if g else 8, hang=True))
    # The newest minor: the chart's install, upgrade and rollback against its API server (what
    # a user of that release runs), and the two deadlocks on the runtime whose kubelet support
    # it keeps (2.1; the kubelet suite runs 1.6 under it too): five clusters, not eleven.
    table += [Run("chart", new, True, chart_life, 20, kubernetes=NEWEST),
              *(Run(s, new, g, f, m, hang=s == "reboot", kubernetes=NEWEST)
                for s, f, m in (("double-del", double_del, 5), ("reboot", reboot, 6))
                for g in (False, True))]
    return table


RUNS = _runs()


def run(spec: Run, shared: Shared) -> Evidence:
    why = spec.runtime.missing()
    if why is not None:
        skip_or_fail(f"{spec.runtime.key}: {why}")
    ev = Evidence(spec.scenario, spec.runtime.key, spec.runtime.version(), spec.guard,
                  kubernetes=spec.kubernetes)
    began = time.monotonic()
    try:
        with cluster(spec.runtime, shared, hang=spec.hang, healthy=spec.healthy,
                     kubernetes=spec.kubernetes) as here:
            ev.facts["cluster_up"] = elapsed(began)
            spec.run(here, ev)
    finally:
        ev.facts["run_seconds"] = elapsed(began)  # the cluster's whole life, teardown included
        ev.save()
    return ev
