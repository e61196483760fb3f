"""watch.py: re-patching after a rewrite, and not fighting another writer in a loop."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

from cni_delguard.node import actions, watch
from tests.support.waiting import wait_for

from .conftest import MULTUS_CONF, make_bundle, run

FAST = watch.Limits(interval=0.02, settle=0.02, max_repatches=3, window=60.0, max_backoff=0.5)


def options(node, bundle_dir=None):
    return actions.Options(
        root=str(node.root),
        bin_dir=str(node.bin),
        conf_dir=str(node.net),
        conf_file=None,
        wrap="multus",
        state_dir=str(node.state),
        bundle_dir=bundle_dir,
    )


def wrapped(path):
    try:
        return json.loads(path.read_text()).get("type") == "cni-delguard"
    except ValueError:
        return False


class Watcher:
    """watch.run in a thread; the bundle is repaired from `bundle` (a fake one-folder bundle)."""

    def __init__(self, node, bundle, limits=FAST):
        self.log: list[str] = []
        self.stop = threading.Event()
        opts = options(node, str(bundle))
        actions.install_bundle(opts, self.log.append)  # what `install --watch` does at start
        self.thread = threading.Thread(
            target=watch.run, args=(opts, limits, self.stop, self.log.append)
        )

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5)
        assert not self.thread.is_alive()

    def patches(self):
        return sum("wrapped 'multus'" in line for line in self.log)


def test_watch_patches_at_start_and_again_after_a_rewrite(node, bundles):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    with Watcher(node, bundles["v1"]) as w:
        wait_for(lambda: wrapped(path), "the conf wrapped", 5.0)
        path.write_text(MULTUS_CONF.replace("kube-ovn", "calico"))  # multus regenerates it
        wait_for(lambda: wrapped(path), "the conf wrapped", 5.0)
        assert json.loads(path.read_text())["delegate"]["delegates"][0]["name"] == "calico"
    assert w.patches() == 2


def test_watch_waits_for_the_conf_to_appear(node, bundles):
    with Watcher(node, bundles["v1"]) as w:
        # The watcher's word that it waits, then the conf (a fixed sleep here lost the race
        # under load: the watcher reads the image's manifest before its first poll).
        wait_for(lambda: any("no .conf" in line for line in w.log), "the watcher waiting", 30.0)
        path = node.write_conf("00-multus.conf", MULTUS_CONF)
        wait_for(lambda: wrapped(path), "the conf wrapped", 5.0)


def test_watch_backs_off_from_a_writer_that_always_undoes_it(node, bundles):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    stop_fight = threading.Event()

    def other_writer() -> None:
        while not stop_fight.is_set():
            if wrapped(path):
                tmp = node.net / ".fight.tmp"
                tmp.write_text(MULTUS_CONF)
                os.rename(tmp, path)
            time.sleep(0.01)

    fighter = threading.Thread(target=other_writer)
    with Watcher(node, bundles["v1"]) as w:
        fighter.start()
        # Until the watcher backs off (its next try is most of the 60 s window away), not a
        # fixed 1.5 s: at load average 97 three re-wraps took longer than that.
        wait_for(lambda: any("backing off" in line for line in w.log), "backing off", 60.0)
        stop_fight.set()
        fighter.join()
    assert w.patches() == FAST.max_repatches, w.log


def test_watch_unchanged_conf_is_not_rewritten(node, bundles):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    with Watcher(node, bundles["v1"]):
        wait_for(lambda: wrapped(path), "the conf wrapped", 5.0)
        st = os.stat(path)
        time.sleep(0.3)
    assert (os.stat(path).st_ino, os.stat(path).st_mtime_ns) == (st.st_ino, st.st_mtime_ns)


def watch_until_wrapped(node, bundles, tmp_path, *python: str) -> str:
    """`install --watch` run by `python ARGS` until it has wrapped the conf, then SIGTERM; it
    must exit 0. Its output (the container log)."""
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    args = node.args("--bundle-dir", str(bundles["v1"]), "--watch", "--watch-interval", "0.05")
    log = tmp_path / "watch.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, *python, "install", *args], stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: wrapped(path), "the conf wrapped", 60, detail=log.read_text)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        proc.kill()
        proc.wait()
    return log.read_text()


def test_watch_command_stops_cleanly_on_sigterm(node, bundles, tmp_path):
    log = watch_until_wrapped(node, bundles, tmp_path, "-c", TOP_LEVEL)
    assert "watch: stopped" in log  # the long-running mode logs to stdout
    assert (node.bin / "cni-delguard").exists()


def test_signal_stop_wakes_a_waiter_that_waits_without_a_timeout():
    stop = watch.SignalStop()
    assert stop.wait(0.01) is False
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(stop.wait(None)))
    waiter.start()
    stop.set()
    waiter.join(30)  # a wake-up that did not come would leave it blocked for good
    assert not waiter.is_alive() and woke == [True]
    assert stop.wait(None) is True  # stays set


def test_budget_caps_repatches_per_window_and_frees_up_as_it_slides():
    now = [0.0]
    limits = watch.Limits(interval=1, max_repatches=2, window=100, max_backoff=8)
    budget = watch.Budget(limits, lambda: now[0])
    for t in (0.0, 10.0):
        now[0] = t
        assert budget.wait_needed() == 0
        budget.spend()
    now[0] = 20.0
    assert budget.wait_needed() == 80  # until the first re-patch leaves the window
    now[0] = 101.0
    assert budget.wait_needed() == 0  # it has left
    budget.spend()
    now[0] = 109.0
    # The window frees up in 1 s, but the back-off has doubled once (1 -> 2) and keeps doubling.
    assert [budget.wait_needed() for _ in range(4)] == [2, 4, 8, 8]
    budget.relax()
    assert budget.wait_needed() == 1


def test_periodic_tasks_run_from_the_loop_and_a_failing_one_stops_nothing(node, bundles):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    calls: list[str] = []

    def boom() -> None:
        raise RuntimeError("metrics writer failed")

    tasks = [watch.Periodic(0.01, lambda: calls.append("tick")), watch.Periodic(0.01, boom)]
    log: list[str] = []
    stop = threading.Event()
    opts = options(node, str(bundles["v1"]))
    t = threading.Thread(
        target=watch.run, args=(opts, FAST, stop, log.append), kwargs={"tasks": tasks}
    )
    t.start()
    try:
        wait_for(lambda: wrapped(path) and len(calls) >= 3, "the conf wrapped and three calls", 5.0)
    finally:
        stop.set()
        t.join(5)
    assert any("metrics writer failed" in line for line in log)


TOP_LEVEL = (
    "import sys; from cni_delguard.cli import main; "
    "sys.exit(main(sys.argv[1:], {}, sys.stdin.buffer, sys.stdout.buffer, sys.stderr))"
)


def _samples(path):
    from prometheus_client.parser import text_string_to_metric_families

    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_the_watcher_refreshes_the_metrics_file_from_the_guards_log_and_markers(node, bundles):
    """cni-delguard install --watch --metrics-file, through the top-level CLI that connects
    the monitoring package: the file appears under --root, readable by a collector that is not root,
    parses as Prometheus text, and counts the decisions logged while the watcher runs (the
    history before it started is not counted: Prometheus would read it as a burst; the count
    is there at 0 from the start, so the first one is an increase)."""
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    log = node.root / "var/log/cni-delguard/delguard.log"
    log.parent.mkdir(parents=True)
    skip = {"ts": "2026-11-26T00:00:00Z", "command": "DEL", "decision": "skip", "network": "n",
            "containerID": "c", "ifname": "eth0"}
    log.write_text(json.dumps(skip) + "\n")
    metrics = node.root / "var/lib/node-exporter/delguard.prom"
    metrics.parent.mkdir(parents=True)
    args = node.args("--bundle-dir", str(bundles["v1"]), "--watch", "--watch-interval", "0.05")
    args += ["--metrics-file", "/var/lib/node-exporter/delguard.prom", "--metrics-interval", "0.05"]
    proc = subprocess.Popen([sys.executable, "-c", TOP_LEVEL, "install", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    key = ("cni_delguard_decisions_total", (("command", "DEL"), ("decision", "skip")))
    guarded = ("cni_delguard_node_guarded", ())
    try:
        wait_for(lambda: _samples(metrics).get(guarded) == 1, "the node guarded, in the file", 20)
        assert _samples(metrics)[key] == 0
        with log.open("a") as f:
            f.write(json.dumps(skip) + "\n")
        wait_for(lambda: _samples(metrics).get(key) == 1, "the skip logged meanwhile, counted", 20)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
    assert wrapped(path)
    assert metrics.stat().st_mode & 0o777 == 0o644
    assert _samples(metrics)[("cni_delguard_rewraps_total", ())] >= 1


def _top_level(argv):
    """`cni-delguard install ...` through cni_delguard.cli, whose `install` has the watcher's
    long-running options (node.cli's own main has none)."""
    from cni_delguard.cli import tool_main

    out, err = io.StringIO(), io.StringIO()
    return tool_main(argv, out, err), err.getvalue()


def test_node_clis_own_install_is_one_shot(node, bundles):
    """node/ has no long-running mode of its own: the watcher is assembled above it, with its
    metrics (cni_delguard/watcher.py), and node.cli's main knows neither flag."""
    node.write_conf("00-multus.conf", MULTUS_CONF)
    for flag in ("--watch", "--metrics-file"):
        r = run(["install", *node.args("--bundle-dir", str(bundles["v1"]), flag, "/m")])
        assert r.code == 2
        assert f"unrecognized arguments: {flag}" in r.err


def test_a_metrics_interval_that_is_not_a_positive_number_is_a_usage_error(node, bundles):
    node.write_conf("00-multus.conf", MULTUS_CONF)
    for bad in ("0", "-1", "nan"):
        args = node.args("--bundle-dir", str(bundles["v1"]), "--watch", "--metrics-interval", bad)
        code, err = _top_level(["install", *args])
        assert (code, err.count("\n")) == (2, 1), err
        assert f"--metrics-interval {bad}: give a number of seconds" in err


def test_a_condition_is_said_once_and_its_clearing_is_no_line_of_its_own():
    lines: list[str] = []
    once = watch.Once(lines.append)
    for message in ("bundle missing", "bundle missing", "", "", "bundle missing", "conf gone"):
        once(message)
    assert lines == ["bundle missing", "bundle missing", "conf gone"]


# Stands in for a plugin that a host preload stops (main's bundle and a GLIBC_2.38 preload, which
# tests/test_frozen_hostile_host.py shows on the frozen bundle): while the node's
# /etc/ld.so.preload exists, VERSION dies as a loader's "version `GLIBC_2.38' not found" does.
PRELOAD_STOPS_IT = """#!/bin/sh
[ -e /etc/ld.so.preload ] || exit 0
echo "version \\`GLIBC_2.38' not found (required by /lib/libedr.so)" >&2
kill -KILL $PPID
"""


def test_watch_unwraps_a_plugin_that_stops_running_and_wraps_it_again(node, tmp_path):
    """A preload that appears after install: the watcher re-runs the runs-on-node check (at once,
    since the node's /etc/ld.so.preload changed), takes the guard out of the conf (the node's own
    conf back, byte for byte), and wraps it again once the plugin runs."""
    bundle = make_bundle(tmp_path / "preloaded", "v1")
    hook = bundle / "_internal" / "on-version"
    hook.write_text(PRELOAD_STOPS_IT)
    hook.chmod(0o755)
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    preload = node.root / "etc" / "ld.so.preload"
    preload.parent.mkdir(exist_ok=True)
    with Watcher(node, bundle) as w:
        wait_for(lambda: wrapped(path), "the conf wrapped", 10.0)
        preload.write_text("/lib/libedr.so\n")
        wait_for(lambda: path.read_text() == MULTUS_CONF, "the node's own conf back", 10.0)
        preload.unlink()
        wait_for(lambda: wrapped(path), "the conf wrapped again", 10.0)
    assert any("GLIBC_2.38" in line and "unwrapping" in line for line in w.log), w.log
    assert w.patches() == 2, w.log


class Moving:
    """The runtime's dirs as a distribution moves them under the watcher: `resolve` (what the
    command's resolver does with the layout's links) reads the node's `current` link, as k3s's
    data/current and MicroK8s' current are read, on every poll."""

    def __init__(self, node):
        self.node = node
        self.link = node.root / "var/snap/distro/current"
        self.link.parent.mkdir(parents=True)

    def release(self, name, conf=None):
        """A new release dir (its bin dir, and a conf dir with `conf` when given) and the link
        moved to it, in one rename, as snapd and k3s move theirs."""
        rel = self.link.parent / name
        (rel / "bin").mkdir(parents=True)
        (rel / "net.d").mkdir()
        if conf is not None:
            (rel / "net.d" / "00-multus.conf").write_text(conf)
        tmp = self.link.parent / f".{name}.link"
        tmp.symlink_to(name)
        os.replace(tmp, self.link)
        return rel

    def resolve(self, opts):
        rel = os.path.realpath(self.link)
        return dataclasses.replace(opts, bin_dir=f"{rel}/bin", conf_dir=f"{rel}/net.d")


class MovingWatcher(Watcher):
    def __init__(self, node, bundle, moving):
        self.log = []
        self.stop = threading.Event()
        opts = moving.resolve(options(node, str(bundle)))
        actions.install_bundle(opts, self.log.append)
        self.result = None
        self.counts = watch.Counts()

        def target():
            self.result = watch.run(opts, FAST, self.stop, self.log.append,
                                    counts=self.counts, resolve=moving.resolve)

        self.thread = threading.Thread(target=target)


def test_watch_installs_into_a_new_release_dir_and_wraps_the_new_conf_dir(node, bundles):
    """A k3s release-dir upgrade or a MicroK8s refresh: the link moves to a new dir whose bin
    dir has no guard and whose conf is the distribution's own; the bundle lands there first,
    then the conf there is wrapped; the old dir is left as it was."""
    moving = Moving(node)
    old = moving.release("7229", MULTUS_CONF)
    with MovingWatcher(node, bundles["v1"], moving) as w:
        wait_for(lambda: wrapped(old / "net.d/00-multus.conf"), "the first conf wrapped", 5.0)
        new = moving.release("7300", MULTUS_CONF)  # a refresh; multus writes its conf anew
        wait_for(lambda: wrapped(new / "net.d/00-multus.conf"), "the new conf wrapped", 5.0)
        assert (new / "bin/cni-delguard").is_symlink()
        assert (new / "bin/cni-delguard").resolve().parent.parent == new / "bin"
        assert (old / "bin/cni-delguard").is_symlink()  # the old release is left alone
    moved = [i for i, line in enumerate(w.log) if "bin dir moved" in line]
    installed = [i for i, line in enumerate(w.log) if f"{new}/bin/cni-delguard ->" in line]
    wraps = [i for i, line in enumerate(w.log) if f"{new}/net.d/00-multus.conf: wrapped" in line]
    assert moved and installed and wraps, w.log
    assert moved[0] < installed[0] < wraps[0], w.log  # the plugin before the conf naming it
    assert w.result is not None and w.result.bin_dir == f"{new}/bin"


def test_watch_follows_a_bin_dir_move_with_the_conf_unchanged(node, bundles):
    """k3s before October 2024: the conf dir stays, the bin dir is a new release's (and the
    old release dir is removed): the guard is installed there, the conf stays wrapped."""
    moving = Moving(node)
    moving.release("a1")
    opts = options(node)
    path = node.write_conf("00-multus.conf", MULTUS_CONF)

    def resolve(o):
        return dataclasses.replace(o, bin_dir=f"{os.path.realpath(moving.link)}/bin",
                                   conf_dir=opts.conf_dir)

    moving.resolve = resolve
    with MovingWatcher(node, bundles["v1"], moving) as w:
        wait_for(lambda: wrapped(path), "the conf wrapped", 5.0)
        new = moving.release("b2")
        shutil.rmtree(moving.link.parent / "a1")
        wait_for((new / "bin/cni-delguard").is_symlink, "the guard in b2", 5.0)
        assert wrapped(path)
    assert w.patches() == 1, w.log
    assert not any("trying again" in line for line in w.log), w.log


def test_watch_unwraps_when_the_new_bin_dir_cannot_take_the_bundle(node, bundles):
    """The new bin dir cannot be written (here: a file where its parent should be): the conf
    must not keep naming a guard the runtime cannot find, so it is unwrapped, byte for byte."""
    moving = Moving(node)
    moving.release("a1")
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    blocked = node.root / "blocked"
    blocked.write_text("not a dir\n")
    state = {"bin": None}
    first = f"{os.path.realpath(moving.link)}/bin"

    def resolve(o):
        return dataclasses.replace(o, bin_dir=state["bin"] or first)

    moving.resolve = resolve
    with MovingWatcher(node, bundles["v1"], moving) as w:
        wait_for(lambda: wrapped(path), "the conf wrapped", 5.0)
        assert w.counts.unfixed == ""
        state["bin"] = str(blocked / "bin")
        wait_for(lambda: path.read_text() == MULTUS_CONF, "the node's own conf back", 5.0)
        wait_for(lambda: w.counts.unfixed, "the failure kept for the liveness probe", 5.0)
        assert str(blocked / "bin") in w.counts.unfixed
        state["bin"] = None  # the pod restarted with the node's current mounts, say
        wait_for(lambda: wrapped(path), "wrapped again", 5.0)
        wait_for(lambda: not w.counts.unfixed, "the failure cleared", 5.0)
    assert any("cannot install into" in line and "unwrapping" in line for line in w.log), w.log
    # said once while it kept failing (every poll would flood the pod's log)
    assert sum("cannot install into" in line for line in w.log) == 1, w.log


def test_the_watcher_logs_what_assess_says_once_at_start(node, bundles, tmp_path):
    """`install --watch` (the whole command line, as the DaemonSet runs it) says at start what
    `cni-delguard assess` says of the node: one line, the same summary."""
    from cni_delguard.ops import assess

    node.write_conf("00-multus.conf", MULTUS_CONF)
    said = assess.examine(str(node.root)).summary()
    log = watch_until_wrapped(node, bundles, tmp_path, "-m", "cni_delguard")
    lines = [line for line in log.splitlines() if " cni-delguard: assess: " in line]
    assert len(lines) == 1, log
    assert lines[0].endswith(f"cni-delguard: assess: {said}")
    assert "multus thin, its network inline" in said
