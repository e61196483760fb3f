"""A node that stays guarded: the real installer processes against fake node roots (issue 10).

Each test runs the installer as a process: the frozen binary (the product; its own folder is the
bundle it installs), or with DELGUARD_UNDER_TEST=package the package with a fake one-folder
bundle. multus is played by the test, writing its conf the way multus does (thin: one rename of
a regenerated 00-multus.conf; thick: delete on exit, write again on start). The watcher polls
every 0.2 s here (1 s by default); waits are generous bounds, never timed assertions.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from cni_delguard.host.layouts import BY_NAME
from cni_delguard.node import bundle, runs
from tests.support import guard
from tests.support.installerproc import WatchProc, command, installer
from tests.support.waiting import wait_for

from .conftest import MULTUS_CONF, make_bundle

FROZEN = guard.under_test() == "frozen"
THICK_CONF = """{"cniVersion":"0.3.1","name":"multus-cni-network","type":"multus-shim",
"socketDir":"/run/multus/","clusterNetwork":"/etc/cni/net.d/10-calico.conflist"}
"""
MULTUS_1_0_LIST = """{"cniVersion":"1.0.0","name":"multus-cni-network","plugins":[
{"type":"multus","kubeconfig":"/etc/cni/net.d/multus.d/multus.kubeconfig",
"delegates":[{"cniVersion":"1.0.0","name":"calico","plugins":[{"type":"calico"}]}]}]}
"""
BOUND = 30.0  # seconds: a generous bound for "the wrap is back" on a loaded 2-core machine
EVERY = 0.05  # seconds between checks: guarded() execs the plugin


def bundle_args(tmp: Path) -> list[str]:
    """The frozen binary installs its own folder; the package needs a bundle to install."""
    if FROZEN:
        return []
    where = tmp / "fake-bundle"
    if not where.exists():
        make_bundle(where, "fake")
    return ["--bundle-dir", str(where)]


@pytest.fixture
def watcher(node, tmp_path):
    started: list[WatchProc] = []

    def start(*extra: str) -> WatchProc:
        w = WatchProc(node, tmp_path, *bundle_args(tmp_path), *extra)
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop()


def conf_of(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def says(w, text: str, what: str) -> None:
    """Wait until the watcher's output has `text`."""
    wait_for(lambda: text in w.text(), what, BOUND, every=EVERY, detail=w.text)


def guarded_soon(node, path: Path, w: WatchProc) -> None:
    """Wait until the watcher has the node guarded (again)."""
    wait_for(lambda: guarded(node, path), "the node guarded", BOUND, every=EVERY, detail=w.text)


def guarded(node, path: Path) -> bool:
    """The conf names the guard and the plugin it names is complete (its manifest) and runs."""
    conf = conf_of(path)
    if not conf or "cni-delguard" not in json.dumps(conf):
        return False
    return bundle.check(str(node.bin)) is None and runs.runs(str(node.bin)) is None


def multus_writes(path: Path, text: str) -> None:
    """How multus writes its conf: a temp file renamed over it."""
    tmp = path.with_name(".multus.tmp")
    tmp.write_text(text)
    os.rename(tmp, path)


def remove_bundle(node, tmp: Path) -> None:
    """Someone removes the guard from the bin dir: each entry renamed away in one step (the
    watcher may start its repair in between; a slow rmtree in place would race with it)."""
    trash = tmp / f"trash-{time.monotonic_ns()}"
    trash.mkdir()
    for entry in os.listdir(node.bin):
        os.rename(node.bin / entry, trash / entry)
    shutil.rmtree(trash)


def never_names_a_missing_plugin(node) -> bool:
    for name in os.listdir(node.net):
        conf = conf_of(node.net / name)
        if conf and "cni-delguard" in json.dumps(conf) and bundle.check(str(node.bin)):
            return False
    return True


def test_multus_thin_rewrite_is_wrapped_again_with_the_new_content(node, watcher):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    w = watcher()
    guarded_soon(node, path, w)
    for net in ("calico", "cilium", "flannel"):  # multus restarts three times
        multus_writes(path, MULTUS_CONF.replace("kube-ovn", net))
        guarded_soon(node, path, w)
        assert conf_of(path)["delegate"]["delegates"][0]["name"] == net
    assert w.text().count("wrapped 'multus'") == 4
    assert "found multus thin (multus) in 00-multus.conf" in w.text()


def test_multus_thick_deletes_and_recreates_its_conf_and_the_wrap_comes_back(node, watcher):
    path = node.write_conf("00-multus.conf", THICK_CONF)
    w = watcher()
    guarded_soon(node, path, w)
    path.unlink()  # multus-thick exits
    wait_for(
        lambda: "does not exist" in w.text() or "no .conf" in w.text(),
        "the watcher to see the conf gone",
        BOUND,
        every=EVERY,
        detail=w.text,
    )
    multus_writes(path, THICK_CONF)  # and starts again
    guarded_soon(node, path, w)
    assert conf_of(path)["delegate"] == json.loads(THICK_CONF)
    assert "found multus thick (multus-shim) in 00-multus.conf" in w.text()


def test_uninstall_while_the_watcher_runs_wins_and_nothing_wraps_again(node, watcher):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    original = path.read_bytes()
    w = watcher()
    guarded_soon(node, path, w)
    r = installer(node, "uninstall")
    assert r.returncode == 0, r.stderr
    assert path.read_bytes() == original
    assert os.listdir(node.bin) == []
    says(w, "uninstalled at", "the watcher to honour the uninstall record")
    multus_writes(path, MULTUS_CONF)  # multus restarts: the watcher must not take it back
    time.sleep(20 * 0.2)  # twenty polls of the watcher
    assert path.read_bytes() == original
    assert os.listdir(node.bin) == []
    assert w.proc.poll() is None  # still running (a restarted pod would be a new install)
    ready = installer(node, "ready")
    assert ready.returncode == 13, ready.stdout


def test_bundle_removed_under_the_watcher_is_restored(node, watcher, tmp_path):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    w = watcher()
    guarded_soon(node, path, w)
    remove_bundle(node, tmp_path)
    guarded_soon(node, path, w)
    assert "the guard's plugin is broken" in w.text()


def test_a_half_deleted_bundle_is_repaired_not_trusted(node, watcher):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    w = watcher()
    guarded_soon(node, path, w)
    version = node.bin / os.readlink(node.bin / "cni-delguard").split("/")[0]
    victims = sorted(p for p in version.rglob("*") if p.is_file())[::4]  # a quarter of the files
    for p in victims:
        p.unlink(missing_ok=True)  # the watcher may be replacing the whole dir meanwhile
    wait_for(
        lambda: bundle.check(str(node.bin), deep=True) is None,
        "the bundle repaired",
        BOUND,
        every=EVERY,
        detail=w.text,
    )
    assert guarded(node, path)


def test_without_a_bundle_to_restore_the_watcher_unwraps_the_conf(node, watcher, tmp_path):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    r = installer(node, "install", *bundle_args(tmp_path))
    assert r.returncode == 0, r.stderr
    w = watcher("--no-bundle")
    remove_bundle(node, tmp_path)
    wait_for(
        lambda: conf_of(path) == json.loads(MULTUS_CONF),
        "the original conf back",
        BOUND,
        every=EVERY,
        detail=w.text,
    )
    assert path.read_text() == MULTUS_CONF  # the recorded original, byte for byte
    assert never_names_a_missing_plugin(node)


def test_two_installers_at_once_as_pid_1_in_their_own_pid_namespaces(node, tmp_path):
    """Two containers' installers: both PID 1, so PID-only temp names would collide."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1)")
    node.write_conf("00-multus.conf", MULTUS_CONF)
    src = tmp_path / "big-bundle"  # a bigger bundle: a copy long enough for the two to overlap
    if FROZEN:
        shutil.copytree(guard.frozen_binary().resolve().parent, src, symlinks=True)
        (src / "_internal" / "filler.bin").write_bytes(os.urandom(64 << 20))
    else:
        make_bundle(src, "big", filler=64 << 20)
    argv = [*command(), "install", *node.args("--bundle-dir", str(src))]
    pid1 = "import os, sys; assert os.getpid() == 1; os.execv(sys.argv[1], sys.argv[1:])"
    procs = [
        subprocess.Popen(
            ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", pid1, *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert [code for code, _ in results] == [0, 0], results
    versions = [n for n in os.listdir(node.bin) if n.startswith(bundle.PREFIX)]
    assert len(versions) == 1, versions
    assert not [n for n in os.listdir(node.bin) if n.endswith(".tmp")]
    assert bundle.check(str(node.bin), deep=True) is None
    assert runs.runs(str(node.bin)) is None
    assert guarded(node, node.net / "00-multus.conf")
    assert sum("wrapped 'multus'" in err for _, err in results) == 1  # once, not twice


def test_conf_rewritten_between_read_and_write_keeps_the_new_content_wrapped(node, tmp_path):
    """multus rewrites its conf exactly while the installer checks the plugin (between its read
    and its swap): the fake bundle's VERSION hook plays multus at that moment, once (at the
    second VERSION: the first checks the new version runs before its link is switched). The hook
    runs where the plugin runs, in the node's root: its paths are the node's own, and it does
    nothing unless it finds itself there (an installer that ran it outside the node's root must
    not rewrite the host's conf)."""
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    newer = MULTUS_CONF.replace("kube-ovn", "calico")
    src = make_bundle(tmp_path / "hooked", "hooked")
    inside = f"/inside-{uuid.uuid4().hex}"
    (node.root / inside[1:]).mkdir()
    flag = node.root / inside[1:] / "rewritten"
    hook = src / "_internal" / "on-version"
    hook.write_text(
        f"#!/bin/sh\n[ -d {inside} ] || exit 0\n[ -e {inside}/rewritten ] && exit 0\n"
        f"[ -e {inside}/checked ] || {{ : > {inside}/checked; exit 0; }}\n"
        f": > {inside}/rewritten\n"
        f"printf '%s' '{newer}' > /etc/cni/net.d/.new.tmp && "
        "mv /etc/cni/net.d/.new.tmp /etc/cni/net.d/00-multus.conf\n"
    )
    hook.chmod(0o755)
    r = installer(node, "install", "--bundle-dir", str(src))
    assert r.returncode == 0, r.stderr
    assert flag.exists()
    assert "changed while it was being patched; reading it again" in r.stderr
    assert conf_of(path)["delegate"] == json.loads(newer)
    r = installer(node, "uninstall")
    assert r.returncode == 0, r.stderr
    assert path.read_text() == newer  # the original recorded is the one that was wrapped


@pytest.mark.parametrize(
    ("name", "text", "found"),
    [
        pytest.param("00-multus.conf", MULTUS_CONF, "multus thin (multus)", id="thin"),
        pytest.param("00-multus.conf", THICK_CONF, "multus thick (multus-shim)", id="thick"),
        pytest.param("00-multus.conflist", MULTUS_1_0_LIST, "multus thin (multus)", id="list"),
    ],
)
def test_thin_thick_and_conflist_are_detected_without_wrap(node, tmp_path, name, text, found):
    path = node.write_conf(name, text)
    r = installer(node, "install", *bundle_args(tmp_path))
    assert r.returncode == 0, r.stderr
    assert f"(found {found} in {name})" in r.stderr
    assert guarded(node, path)
    assert installer(node, "ready").returncode == 0


def test_boot_with_no_conf_yet_waits_and_succeeds_when_it_appears(node, tmp_path):
    log = tmp_path / "install.err"
    argv = [*command(), "install", *node.args("--wait", "120", *bundle_args(tmp_path))]
    with open(log, "w") as err:
        proc = subprocess.Popen(argv, stderr=err)
    try:
        wait_for(
            lambda: "waiting (up to 120 s)" in log.read_text(),
            "the installer to wait for the conf",
            BOUND,
            every=EVERY,
        )
        assert proc.poll() is None
        path = node.write_conf("00-multus.conf", MULTUS_CONF)
        assert proc.wait(timeout=120) == 0, log.read_text()
    finally:
        proc.kill()
    assert guarded(node, path)


def test_boot_wait_is_bounded_and_says_what_is_missing(node, tmp_path):
    r = installer(node, "install", "--wait", "0.5", *bundle_args(tmp_path))
    assert r.returncode == 4
    assert "no .conf/.conflist/.json file in" in r.stderr


def test_no_bundle_never_wraps_without_a_working_plugin(node):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    r = installer(node, "install", "--no-bundle")
    assert r.returncode == 5
    assert r.stderr.count("\n") == 1 and "install the bundle first" in r.stderr
    assert path.read_text() == MULTUS_CONF


def test_readiness_follows_the_wrap_and_the_plugin(node, tmp_path):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    assert installer(node, "ready").returncode == 10
    assert installer(node, "install", *bundle_args(tmp_path)).returncode == 0
    r = installer(node, "ready")
    assert (r.returncode, r.stdout.startswith("ready:")) == (0, True), r.stdout
    multus_writes(path, MULTUS_CONF)  # the wrap is lost
    r = installer(node, "ready")
    assert r.returncode == 10 and "does not name cni-delguard" in r.stdout
    assert installer(node, "install", *bundle_args(tmp_path)).returncode == 0
    assert installer(node, "ready").returncode == 0
    os.unlink(node.bin / "cni-delguard")  # the plugin is lost
    assert installer(node, "ready").returncode == 11
    assert installer(node, "uninstall").returncode == 0
    assert installer(node, "ready").returncode == 13
    assert installer(node, "ready", "--uninstalled").returncode == 0


def ready_again(node, w) -> None:
    """Wait until `ready` answers 0 (each check execs the probe: every 0.2 s)."""
    wait_for(
        lambda: installer(node, "ready").returncode == 0,
        "ready to answer 0",
        BOUND,
        every=0.2,
        detail=w.text,
    )


def test_readiness_flips_while_the_watcher_is_held_and_back_once_it_runs(node, watcher):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    w = watcher()
    ready_again(node, w)
    os.kill(w.proc.pid, signal.SIGSTOP)  # the watcher cannot react: the loss stays visible
    try:
        multus_writes(path, MULTUS_CONF)
        assert installer(node, "ready").returncode == 10
    finally:
        os.kill(w.proc.pid, signal.SIGCONT)
    ready_again(node, w)


def test_uninstall_on_stop_takes_the_guard_off_when_the_pod_is_deleted(node, watcher):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    w = watcher("--uninstall-on-stop")
    guarded_soon(node, path, w)
    assert w.stop() == 0, w.text()
    assert path.read_text() == MULTUS_CONF
    assert os.listdir(node.bin) == []


def test_the_container_log_shows_each_wrap_and_each_del_let_through(node, watcher, tmp_path):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    log = tmp_path / "delguard.log"
    w = watcher("--follow-log", str(log))
    guarded_soon(node, path, w)
    lines = [
        {"command": "DEL", "decision": "skip", "containerID": "c1", "reason": "no evidence"},
        {"command": "ADD", "decision": "forward", "containerID": "c2"},
        {"command": "DEL", "decision": "forward", "containerID": "c3"},
        {"command": "DEL", "decision": "forward-lenient", "containerID": "c4", "reason": "gone"},
    ]
    with open(log, "a") as f:
        f.writelines(json.dumps(rec) + "\n" for rec in lines)
    says(w, "containerID=c4", "the watcher to print the DEL of c4")
    shown = [ln for ln in w.text().splitlines() if "DEL let through" in ln]
    assert [ln.split("containerID=")[1].split()[0] for ln in shown] == ["c1", "c4"]
    assert "00-multus.conf: wrapped 'multus'" in w.text()


def test_a_watcher_with_no_conf_anywhere_waits_and_guards_the_layout_whose_conf_appears(
    node, watcher
):
    """At boot no network plugin has written its conf yet, in any layout's conf dir: the
    watcher (--layout auto) waits, and when k3s's flannel conf appears it guards that one, in
    k3s's conf dir and bin dir, never the standard ones that also exist on this root."""
    k3s = BY_NAME["k3s"]
    conf_dir = node.root / k3s.conf_dir.lstrip("/")
    bin_dir = node.root / k3s.bin_dirs[0].lstrip("/")
    for d in (conf_dir, bin_dir):
        d.mkdir(parents=True)
    w = watcher()
    wait_for(lambda: "waiting (for as long as it takes)" in w.text(), "the watcher to wait",
             BOUND, every=EVERY, detail=w.text)
    assert os.listdir(node.bin) == [] and os.listdir(bin_dir) == []  # nothing done yet
    path = conf_dir / "00-multus.conf"
    multus_writes(path, MULTUS_CONF)
    wait_for(lambda: conf_of(path) and "cni-delguard" in json.dumps(conf_of(path)),
             "the k3s conf wrapped", BOUND, every=EVERY, detail=w.text)
    assert bundle.check(str(bin_dir)) is None
    assert "(layout k3s, dirs from the layout table, every" in w.text()
    assert os.listdir(node.bin) == []
    assert w.stop() == 0
