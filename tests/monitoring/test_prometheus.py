"""Issue 19, end to end: Debian's Prometheus server scrapes the frozen watcher's endpoint on
loopback while the guard (the copy the watcher installed) is driven through ADD and DEL by real
execs, and every series is read back through Prometheus's query API with the value expected.

The delegates are the test-only fakes of tests/fakes (each says so in its header): stale_delegate
fails a DEL it holds no state for (kube-ovn's answer through multus), undeletable_delegate can
never delete what it added (the release valve's case). The alert rules are loaded into the same
server and must evaluate without error, and so must every query of the dashboard.

Frozen binary only (the watcher installs its own folder): skipped under
DELGUARD_UNDER_TEST=package, where there is no bundle to install.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from cni_delguard import __version__
from cni_delguard.monitoring import series
from delguard_build.rules import Settings, render
from tests.support import guard
from tests.support.fakes import install_fake
from tests.support.guard import HOST_ARCH
from tests.support.installerproc import WatchProc
from tests.support.nodestate import log_lines
from tests.support.paths import widen
from tests.support.waiting import wait_for

from .prometheus import Prometheus

pytestmark = pytest.mark.skipif(
    guard.under_test() == "package", reason="DELGUARD_UNDER_TEST=package: no frozen bundle"
)

REPO = Path(__file__).resolve().parents[2]
COMPONENT = REPO / "installer/kustomize/components/monitoring"
OVERLAY = REPO / "installer/kustomize/overlays/monitoring"
MULTUS_CONF = """{"cniVersion":"0.3.1","name":"multus-cni-network","type":"multus",
"kubeconfig":"/etc/cni/net.d/multus.d/multus.kubeconfig",
"delegates":[{"cniVersion":"0.3.1","name":"net0","type":"bridge"}]}
"""
STUCK_AFTER = 3  # seconds: doctor's 600 is the default; the watcher takes --stuck-after
BOUND = 60.0  # seconds: a generous bound for anything to show up on a loaded 2-core machine


class Node:
    """A node root with a multus conf, the fakes in its CNI bin dir, and a frozen watcher
    (tests/installer's WatchProc: its output collected in a file, stopped with SIGTERM)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "opt/cni/bin"
        self.conf = root / "etc/cni/net.d/00-multus.conf"
        self.state = root / "var/lib/cni/delguard"
        self.log = root / "var/log/cni-delguard/delguard.log"
        # /var/log as a node has it: the guard makes its log dir only as a leaf of a dir that
        # exists (guard/paths.py creatable)
        for d in (self.bin, self.conf.parent, self.log.parent.parent):
            d.mkdir(parents=True)
        self.conf.write_text(MULTUS_CONF)
        install_fake(self.bin, "stale-delegate", "stale_delegate.py")
        install_fake(self.bin, "undeletable", "undeletable_delegate.py")
        widen(self.bin)  # the node's state and log are under the temp dir (tests/support/paths.py)
        self.watcher: WatchProc | None = None

    def args(self, *extra: str) -> list[str]:
        return ["--root", str(self.root), *extra]

    def start(self, *extra: str) -> None:
        self.watcher = WatchProc(self, self.root.parent, *extra)

    def text(self) -> str:
        return self.watcher.text() if self.watcher is not None else ""

    def stop(self) -> int | None:
        return self.watcher.stop() if self.watcher is not None else None

    def metrics_port(self) -> int:
        wait_for(lambda: "metrics: serving" in self.text(), "metrics: serving", BOUND,
                 every=0.2, detail=self.text)
        return int(re.search(r"serving http://127\.0\.0\.1:(\d+)/metrics", self.text())[1])

    def guarded(self) -> bool:
        try:
            return json.loads(self.conf.read_text()).get("type") == "cni-delguard"
        except ValueError:
            return False

    def conf_for(self, network: str, delegate: dict[str, object]) -> dict[str, object]:
        return {"cniVersion": "1.0.0", "name": network, "type": "cni-delguard",
                "delegate": delegate, "stateDir": str(self.state), "logFile": str(self.log),
                "resultCacheDirs": [str(self.root / "var/lib/cni/results")],
                "multusCacheDirs": []}

    def cni(self, command: str, network: str, delegate: dict[str, object], cid: str,
            **conf: object):
        """The installed guard (the watcher's copy, through /opt/cni/bin's link), as a runtime
        execs it."""
        return guard.exec_cni(self.bin, command, {**self.conf_for(network, delegate), **conf}, cid)

    def tool(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """An operator's command, from the build (uninstall removes the installed copy)."""
        r = subprocess.run([str(guard.frozen_binary()), *argv], capture_output=True,
                           text=True, timeout=120, check=False)
        assert "Traceback" not in r.stderr, r.stderr
        return r


@pytest.fixture
def node(tmp_path):
    guard.frozen_or_skip()
    n = Node(tmp_path / "node")
    yield n
    n.stop()


def firing(prom: Prometheus, alertname: str) -> bool:
    return any(a["labels"]["alertname"] == alertname and a["state"] == "firing"
               for a in prom.api("alerts")["alerts"])


def rules() -> dict:
    doc = yaml.safe_load((OVERLAY / "prometheusrule.yaml").read_text())
    return doc["spec"]


def dashboard_queries() -> list[str]:
    board = json.loads((COMPONENT / "dashboard.json").read_text())
    subst = {"$node": ".*", "$__rate_interval": "1m", "$__range": "5m"}
    found = []
    for panel in board["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for k, v in subst.items():
                expr = expr.replace(k, v)
            found.append(expr)
    return found


def test_every_series_reaches_prometheus_with_the_value_expected(node, tmp_path):
    node.start("--metrics-address", "127.0.0.1:0", "--metrics-interval", "0.5",
               "--stuck-after", str(STUCK_AFTER))
    port = node.metrics_port()
    stale = {"type": "stale-delegate", "stateDir": str(tmp_path / "stale")}
    undeletable = {"type": "undeletable"}
    prom_dir = tmp_path / "prometheus"
    prom_dir.mkdir()
    with Prometheus(prom_dir, {"test-node": f"127.0.0.1:{port}"}, rules()) as prom:
        prom.wait_value('up{job="cni-delguard"}', 1, BOUND)
        prom.wait_value("cni_delguard_node_guarded", 1, BOUND)
        since = prom.value("cni_delguard_ready_since_timestamp_seconds")
        assert since is not None and abs(since - time.time()) < BOUND  # guarded since the start
        assert prom.query("cni_delguard_ready") == {
            (("reason", r),): float(r == "guarded") for r in series.READY_REASONS.values()}
        assert prom.query("cni_delguard_mode") == {(("mode", "enforce"),): 1.0,
                                                   (("mode", "observe"),): 0.0}
        build = prom.query("cni_delguard_build_info")
        assert build == {(("arch", HOST_ARCH), ("version", __version__)): 1.0}
        assert prom.value("cni_delguard_rewraps_total") >= 1
        assert prom.value("cni_delguard_state_readable") == 1
        # Every counter is there before anything happened, at 0: the first one is an increase.
        assert prom.query("cni_delguard_decisions_total") == {
            (("command", c), ("decision", d)): 0.0 for c, d in series.DECISION_PAIRS}
        assert prom.query("cni_delguard_delegate_seconds_count") == {
            (("command", c),): 0.0 for c in series.TIMED}
        assert prom.query("cni_delguard_delegate_errors_total") == {
            (("command", c),): 0.0 for c in series.TIMED}
        assert prom.query("cni_delguard_oldest_attempted_timestamp_seconds") == {}  # none yet
        # The values are current: read from the node within the last intervals.
        assert prom.value("cni_delguard_refresh_interval_seconds") == 0.5
        assert prom.value("cni_delguard_refresh_errors_total") == 0
        prom.wait_value("time() - cni_delguard_last_refresh_timestamp_seconds < bool 5", 1, BOUND)

        # A stale DEL: nothing was ever added, the guard answers without the delegate.
        assert node.cni("DEL", "net-a", stale, "stale1") == (0, None)
        # A deadlock break: the ADD fails and so does the delegate's cleanup DEL (no state), the
        # attempted marker stays; the next DEL is forwarded, fails, and is answered with success.
        code, out = node.cni("ADD", "net-a", {**stale, "failAdd": 11}, "break1")
        assert (code, out["code"]) == (1, 11)
        prom.wait_value('cni_delguard_markers{state="attempted"}', 1, BOUND)
        since = prom.value("cni_delguard_oldest_attempted_timestamp_seconds")
        assert since is not None and abs(since - time.time()) < BOUND  # when that ADD began
        assert node.cni("DEL", "net-a", stale, "break1") == (0, None)
        # A strict DEL that keeps failing: a completed ADD its delegate can never delete.
        assert node.cni("ADD", "net-b", undeletable, "stuck1")[0] == 0
        for _ in range(2):
            code, out = node.cni("DEL", "net-b", undeletable, "stuck1")
            assert (code, out["code"]) == (1, 7)
        prom.wait_value("cni_delguard_stuck_strict_dels", 1, BOUND)
        # The operator releases it; the next DEL fails at the delegate and succeeds: released.
        r = node.tool("release", "--state-dir", str(node.state), "--container", "stuck1",
                      "--reason", "test: leak accepted")
        assert r.returncode == 0, r.stderr
        assert node.cni("DEL", "net-b", undeletable, "stuck1") == (0, None)

        expected_decisions = {
            ("DEL", "skip"): 1,
            ("ADD", "add-failed"): 1,
            ("DEL", "forward-lenient"): 1,
            ("ADD", "add-completed"): 1,
            ("DEL", "forward-strict"): 2,
            ("DEL", "released"): 1,
        }
        expected = {(("command", c), ("decision", d)): float(expected_decisions.get((c, d), 0))
                    for c, d in series.DECISION_PAIRS}
        wait_for(lambda: prom.query("cni_delguard_decisions_total") == expected,
                 "the decisions expected", BOUND, every=0.2,
                 detail=lambda: str(prom.query("cni_delguard_decisions_total")))
        prom.wait_value("cni_delguard_stuck_strict_dels", 0, BOUND)
        assert prom.value("cni_delguard_deadlock_breaks_total") == 2  # lenient + released
        assert prom.value("cni_delguard_released_total") == 1
        assert prom.query("cni_delguard_markers") == {
            (("state", s),): 0.0 for s in ("attempted", "completed", "deleting", "corrupt")
        }
        assert prom.query("cni_delguard_oldest_attempted_timestamp_seconds") == {}
        # The delegate's calls: 2 ADDs (one failed), 4 forwarded DELs (3 failed: the lenient
        # one, the 2 strict ones; the released one is a 4th failure), and its times.
        assert prom.query("cni_delguard_delegate_seconds_count") == {
            (("command", "ADD"),): 2.0, (("command", "DEL"),): 4.0}
        assert prom.query("cni_delguard_delegate_errors_total") == {
            (("command", "ADD"),): 1.0, (("command", "DEL"),): 4.0}
        buckets = prom.query('cni_delguard_delegate_seconds_bucket{command="DEL",le="+Inf"}')
        assert buckets == {(("command", "DEL"), ("le", "+Inf")): 4.0}
        assert 0 < prom.value('cni_delguard_delegate_seconds_sum{command="DEL"}') < BOUND
        for zero in ("cni_delguard_log_malformed_lines_total", "cni_delguard_log_read_errors_total",
                     "cni_delguard_watch_errors_total", "cni_delguard_backoffs_total",
                     "cni_delguard_observe_would_skip_total", "cni_delguard_refresh_errors_total"):
            assert prom.value(zero) == 0, zero
        assert prom.value("cni_delguard_log_readable") == 1
        assert prom.value("process_resident_memory_bytes") > 0  # the watcher's own cost

        # The rules are loaded and evaluate without error; so does every dashboard query.
        wait_for(lambda: all(r["health"] == "ok" and not r["lastEvaluation"].startswith("0001")
                             for g in prom.api("rules")["groups"] for r in g["rules"]),
                 "every rule evaluated", BOUND, every=0.2, detail=lambda: str(prom.api("rules")))
        names = {r["name"] for g in prom.api("rules")["groups"] for r in g["rules"]}
        loaded = {r.get("alert") or r["record"] for g in rules()["groups"] for r in g["rules"]}
        assert names == loaded
        for expr in dashboard_queries():
            prom.api("query", query=expr)  # asserts status success: it parsed and evaluated

        # Observe mode: the conf's guard forwards every DEL. A DEL the guard would have
        # answered with success fails at the delegate, reaches the runtime, and the alert that
        # says so fires (it has no `for:`): end to end, through the rules Prometheus evaluates.
        r = node.tool("install", "--root", str(node.root), "--mode", "observe", "--no-bundle")
        assert r.returncode == 0, r.stderr
        prom.wait_value('cni_delguard_mode{mode="observe"}', 1, BOUND)
        assert prom.value('cni_delguard_mode{mode="enforce"}') == 0
        assert not firing(prom, "CniDelguardObserveWouldFree")
        code, out = node.cni("ADD", "net-a", {**stale, "failAdd": 11}, "observe1")
        assert (code, out["code"]) == (1, 11)
        code, out = node.cni("DEL", "net-a", stale, "observe1", mode="observe")
        assert code == 1  # observed: the delegate's failure reaches the runtime
        prom.wait_value("cni_delguard_observe_would_free_total", 1, BOUND)
        wait_for(lambda: firing(prom, "CniDelguardObserveWouldFree"),
                 "CniDelguardObserveWouldFree to fire", BOUND, every=0.2,
                 detail=lambda: str(prom.api("alerts")))
        (alert,) = [a for a in prom.api("alerts")["alerts"]
                    if a["labels"]["alertname"] == "CniDelguardObserveWouldFree"]
        assert alert["labels"]["node"] == "test-node"
        url = alert["annotations"]["runbook_url"]
        assert url.endswith("docs/runbooks.md#cnidelguardobservewouldfree")

        # An uninstall: the node is no longer guarded, and says why.
        r = node.tool("uninstall", "--root", str(node.root))
        assert r.returncode == 0, r.stderr
        prom.wait_value("cni_delguard_node_guarded", 0, BOUND)
        assert prom.value("cni_delguard_ready_since_timestamp_seconds") > since  # since then
        assert prom.value('cni_delguard_ready{reason="uninstalled"}') == 1
        assert prom.value('cni_delguard_ready{reason="guarded"}') == 0
        assert prom.query("cni_delguard_mode") == {(("mode", "enforce"),): 0.0,
                                                   (("mode", "observe"),): 0.0}
    assert not prom.data.exists()  # the server's data dir goes with it
    assert node.stop() == 0, node.text()


def test_clients_that_hold_the_endpoint_do_not_stall_the_guarding(node):
    """Every slot held by a client that never sends its request, another trickling bytes, and
    one sending a huge header: the watcher still wraps a rewritten conf again, and once the
    hostile clients are cut off a scrape is served."""
    node.start("--metrics-address", "127.0.0.1:0", "--metrics-interval", "0.5")
    port = node.metrics_port()
    wait_for(node.guarded, "the node guarded", BOUND, every=0.2, detail=node.text)
    hostile = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
    try:
        try:
            hostile[0].sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 100_000)
        except OSError:
            pass  # cut off (431) while still sending: what should happen
        for _ in range(3):
            node.conf.write_text(MULTUS_CONF)  # multus regenerates its conf: the wrap is lost
            assert not node.guarded()
            wait_for(node.guarded, "the node guarded", BOUND, every=0.2, detail=node.text)
            for s in hostile[1:3]:
                try:
                    s.sendall(b"G")
                except OSError:
                    pass  # cut off at its deadline
    finally:
        for s in hostile:
            s.close()

    def served() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            body = b"".join(iter(lambda: s.recv(65536), b""))
        return b"cni_delguard_node_guarded 1.0" in body

    wait_for(served, "a scrape saying the node is guarded", BOUND, every=0.2)
    assert node.text().count("metrics:") == 1, node.text()  # serving; no traceback, no noise
    assert os.path.exists(node.bin / "cni-delguard")


def test_a_port_already_taken_is_one_line_and_the_node_stays_guarded(node, tmp_path):
    """The frozen watcher asked to listen where another process already does (which could answer
    'guarded' in its place): one line that says so, `ready --live-file` (the monitoring
    overlay's readiness probe) fails saying so, and the guarding goes on (the conf wrapped, and
    wrapped again after multus rewrites it); once the port is free, the endpoint comes up without
    a restart and the pod is ready again."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    heartbeat = tmp_path / "live"

    def ready() -> subprocess.CompletedProcess[str]:
        return node.tool("ready", "--root", str(node.root), "--live-file", str(heartbeat))

    try:
        node.start("--metrics-address", f"127.0.0.1:{port}", "--metrics-interval", "0.5",
                   "--live-file", str(heartbeat))
        wait_for(node.guarded, "the node guarded", BOUND, every=0.2, detail=node.text)
        node.conf.write_text(MULTUS_CONF)
        wait_for(node.guarded, "the node guarded", BOUND, every=0.2, detail=node.text)
        wait_for(lambda: "cannot listen" in node.text(), "cannot listen", BOUND, every=0.2,
                 detail=node.text)
        time.sleep(2)  # several refreshes, each trying again
        said = [ln for ln in node.text().splitlines() if "metrics:" in ln]
        assert len(said) == 1, said
        assert f"cannot listen on 127.0.0.1:{port}" in said[0] and "still guarded" in said[0]
        wait_for(lambda: ready().returncode == 16, "ready to fail on the port", BOUND, every=0.2,
                 detail=lambda: str(ready()))
        assert f"127.0.0.1:{port} is held by another process" in ready().stdout
    finally:
        holder.close()
    wait_for(lambda: "metrics: serving" in node.text(), "metrics: serving", BOUND, every=0.2,
             detail=node.text)
    wait_for(lambda: ready().returncode == 0, "ready again", BOUND, every=0.2,
             detail=lambda: str(ready()))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        body = b"".join(iter(lambda: s.recv(65536), b""))
    assert b"cni_delguard_node_guarded 1.0" in body
    assert node.stop() == 0, node.text()


# The rules rendered for this suite's scrape interval, 1 s: every window is then a number of
# seconds (the errors' 40 intervals, 40 s), so a watcher older than its windows is a minute away.
FAST = Settings(interval="1s")
WATCHER_AGE = 50.0  # seconds: past the errors' window of 40 intervals (40 s at 1 s)


def fast_rules() -> dict:
    template = (COMPONENT / "prometheusrule.template.yaml").read_text()
    return yaml.safe_load(render(template, FAST))["spec"]


# The alerts that fire on a count: what a Prometheus that read old counts as new ones would raise.
ON_COUNTS = ("CniDelguardErrors", "CniDelguardWrapContested", "CniDelguardObserveWouldFree")


def raised(prom: Prometheus) -> list[dict]:
    """Alerts firing, and those on counts pending (before the first scrape of a new Prometheus,
    CniDelguardNoTargets is pending for an evaluation or two: no target yet, for 15 minutes)."""
    return [a for a in prom.api("alerts")["alerts"]
            if a["state"] == "firing" or a["labels"]["alertname"] in ON_COUNTS]


def test_a_prometheus_restarted_with_an_empty_tsdb_pages_nobody_for_old_counts(node, tmp_path):
    """kube-prometheus-stack keeps its TSDB in an emptyDir by default: a Prometheus restarted (or
    a new HA replica) sees each counter's current count as its first sample. A watcher that
    counted an error a minute before, and was scraped then, is read again by a new, empty
    Prometheus: no alert is pending or firing, for longer than the longest `for:` of an alert
    that counts errors. The frozen watcher, Debian's Prometheus, the rules at 1 s."""
    node.start("--metrics-address", "127.0.0.1:0", "--metrics-interval", "0.5")
    port = node.metrics_port()
    started = time.monotonic()
    error = {"ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "command": "DEL",
             "decision": "error", "network": "n", "containerID": "c1", "ifname": "eth0"}
    log_lines(node.log, [error])
    first, second = tmp_path / "prometheus-1", tmp_path / "prometheus-2"
    first.mkdir()
    second.mkdir()
    targets = {"test-node": f"127.0.0.1:{port}"}
    errors = 'cni_delguard_decisions_total{command="DEL",decision="error"}'
    with Prometheus(first, targets, fast_rules()) as prom:
        prom.wait_value(errors, 1, BOUND)  # counted, and scraped
        # The error is new to this Prometheus: CniDelguardErrors fires (the rules have teeth).
        wait_for(lambda: firing(prom, "CniDelguardErrors"), "CniDelguardErrors to fire", BOUND,
                 every=0.2, detail=lambda: str(prom.api("alerts")))
    time.sleep(max(0.0, WATCHER_AGE - (time.monotonic() - started)))
    with Prometheus(second, targets, fast_rules()) as prom:  # a new TSDB: nothing of the first
        prom.wait_value(errors, 1, BOUND)
        prom.wait_value('up{job="cni-delguard"}', 1, BOUND)
        wait_for(lambda: all(r["health"] == "ok" and not r["lastEvaluation"].startswith("0001")
                             for g in prom.api("rules")["groups"] for r in g["rules"]),
                 "every rule evaluated", BOUND, every=0.2, detail=lambda: str(prom.api("rules")))
        # Fifteen evaluations (one a second) with the counts as first samples: past
        # CniDelguardErrors' `for:` (4 intervals), which a new-series rule would have tripped.
        evaluations: set[str] = set()

        def fifteen_quiet() -> bool:
            assert raised(prom) == [], prom.api("alerts")
            evaluations.add(prom.api("rules")["groups"][0]["rules"][0]["lastEvaluation"])
            return len(evaluations) > 15

        wait_for(fifteen_quiet, "fifteen evaluations without an alert", BOUND, every=0.5)
    assert node.stop() == 0, node.text()
