"""The installer as shipped: the frozen one-folder binary installing itself.

Runs the frozen build (tests/support/guard.py: DELGUARD_BIN, or dist/ from tools/build.sh);
skipped with DELGUARD_UNDER_TEST=package, where there is no bundle to install.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support import guard
from tests.support.guard import HOST_ARCH
from tests.support.mounts import umount
from tests.support.noderoot import BUSYBOX, needs_root
from tests.support.waiting import wait_for

from .conftest import MULTUS_CONF

pytestmark = pytest.mark.skipif(
    guard.under_test() == "package", reason="DELGUARD_UNDER_TEST=package: no frozen bundle"
)


@pytest.fixture(autouse=True)
def bundle_built():
    guard.frozen_or_skip()


def version_via(link):
    return subprocess.run(
        [link],
        env={"CNI_COMMAND": "VERSION"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def frozen(*argv):
    return subprocess.run(
        [guard.frozen_binary(), *argv], capture_output=True, text=True, timeout=120, check=False
    )


def test_frozen_binary_installs_its_own_folder_and_uninstalls(node):
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    r = frozen("install", *node.args())
    assert r.returncode == 0, r.stderr
    assert json.loads(path.read_text())["type"] == "cni-delguard"
    arch = HOST_ARCH
    (manifest,) = node.bin.glob(".cni-delguard-*/.delguard-manifest.json")
    assert json.loads(manifest.read_text())["arch"] == arch  # the bundle's build info
    assert f"({arch}, verified complete, runs on the node)" in r.stderr
    assert frozen("--version").stdout.startswith(f"cni-delguard 0.1.0 ({arch}; frozen, Python ")
    v = version_via(node.bin / "cni-delguard")
    assert v.returncode == 0, v.stderr
    assert "1.0.0" in json.loads(v.stdout)["supportedVersions"]
    r = frozen("uninstall", *node.args())
    assert r.returncode == 0, r.stderr
    assert path.read_text() == MULTUS_CONF
    assert os.listdir(node.bin) == []


def test_exec_of_the_frozen_plugin_during_upgrades_never_fails(node, tmp_path):
    folder = guard.frozen_binary().resolve().parent
    versions = []
    for name in ("a", "b", "c"):  # three digests of the same build: every install is a switch
        copy = tmp_path / name
        shutil.copytree(folder, copy, symlinks=True)
        (copy / "_internal" / f"marker-{name}").write_text(name)
        versions.append(copy)
    node.write_conf("00-multus.conf", MULTUS_CONF)
    assert frozen("install", *node.args("--bundle-dir", str(versions[0]))).returncode == 0
    stop, failures, runs = threading.Event(), [], []

    def runtime() -> None:
        while not stop.is_set():
            v = version_via(node.bin / "cni-delguard")
            runs.append(v.returncode)
            if v.returncode != 0 or "supportedVersions" not in v.stdout:
                failures.append((v.returncode, v.stdout, v.stderr[-300:]))

    threads = [threading.Thread(target=runtime) for _ in range(2)]
    for t in threads:
        t.start()
    for i in range(1, 7):
        r = frozen("install", *node.args("--bundle-dir", str(versions[i % 3])))
        assert r.returncode == 0, r.stderr
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join()
    assert failures == []
    assert len(runs) >= 10


def test_a_state_dir_that_climbs_out_of_root_stays_under_it(node):
    """`--state-dir /../var/lib/cni/delguard` is /var/lib/cni/delguard, as the guard reads it:
    the installer's records go there under --root (not beside the root), and so does the conf."""
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    r = frozen("install", *node.args("--state-dir", "/../var/lib/cni/delguard"))
    assert r.returncode == 0, r.stderr
    assert (node.state / "installer").is_dir()
    assert not (node.root.parent / "var").exists()
    assert json.loads(path.read_text())["stateDir"] == "/var/lib/cni/delguard"
    r = frozen("uninstall", *node.args("--state-dir", "/../var/lib/cni/delguard"))
    assert r.returncode == 0, r.stderr
    assert path.read_text() == MULTUS_CONF


@contextlib.contextmanager
def impostor(node, tmp_path, environ):
    """A real process named containerd (Debian's static busybox copied to that name: its comm is
    the file's name; static, so the LD_* variables do nothing to it), PID 1 of a PID namespace of
    its own whose /proc is mounted at the node's /proc: the one runtime the node root shows, so
    any reader of the node's /proc finds it first. What any pod running as root can start."""
    needs_root()
    exe = tmp_path / "impostor" / "containerd"
    exe.parent.mkdir()
    shutil.copy2(BUSYBOX, exe)
    # Only the impostor gets `environ` (a dynamically linked unshare would obey LD_DEBUG=help):
    # a Python of a clean environment execs it with argv[0] `busybox`, so it runs `sleep`.
    start = "import json, os, sys; os.execve(sys.argv[1], ['busybox', 'sleep', '600'], " \
            "json.loads(sys.argv[2]))"
    holder = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--kill-child", sys.executable, "-I", "-c", start,
         str(exe), json.dumps(environ)],
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, stdin=subprocess.DEVNULL)
    proc = node.root / "proc"
    mounted = False
    try:
        children = Path(f"/proc/{holder.pid}/task/{holder.pid}/children")
        wait_for(lambda: children.read_text().split(), "the impostor started", 10.0)
        (pid,) = children.read_text().split()
        wait_for(lambda: Path(f"/proc/{pid}/comm").read_text() == "containerd\n",
                 "the impostor exec'd", 10.0)
        proc.mkdir(exist_ok=True)
        subprocess.run(["nsenter", "--target", pid, "--pid", "--", "mount", "-t", "proc", "proc",
                        str(proc)], check=True)
        mounted = True
        assert (proc / "1" / "comm").read_text() == "containerd\n"
        assert b"LD_DEBUG=" in (proc / "1" / "environ").read_bytes()
        yield
    finally:
        if mounted:
            umount(proc)
        holder.kill()
        holder.wait()


@pytest.mark.parametrize(
    "debug",
    [
        pytest.param({"LD_DEBUG": "help"}, id="help"),
        pytest.param({"LD_DEBUG": "all", "LD_DEBUG_OUTPUT": "{out}/x", "LD_PROFILE": "libc.so.6",
                      "LD_PROFILE_OUTPUT": "{out}"}, id="output"),
    ],
)
def test_a_process_named_containerd_changes_nothing_the_installer_does(node, tmp_path, debug):
    """Issue 38, item 2: the probe never takes the environment of a process it cannot prove is
    the runtime; it takes none. On 20ffe12 the frozen installer read the impostor's environ from
    the node's /proc: with LD_DEBUG=help every VERSION probe printed the loader's help and
    failed (install refused to wrap, exit 5; ready exit 12; the watcher unwrapped), with
    LD_DEBUG_OUTPUT each probe wrote the loader's trace into a host dir."""
    out = node.root / "var" / "lib" / "cni" / "debug"
    out.mkdir(parents=True)
    environ = {k: v.format(out=out) for k, v in debug.items()}
    path = node.write_conf("00-multus.conf", MULTUS_CONF)
    with impostor(node, tmp_path, environ):
        r = frozen("install", *node.args())
        assert r.returncode == 0, r.stderr
        assert json.loads(path.read_text())["type"] == "cni-delguard"
        r = frozen("ready", *node.args())
        assert r.returncode == 0, r.stdout + r.stderr
        watcher = subprocess.Popen(
            [guard.frozen_binary(), "install", *node.args("--watch", "--watch-interval", "0.05")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        try:
            time.sleep(3)  # the watcher's first runs-on-node check is at its start
            assert watcher.poll() is None
            assert json.loads(path.read_text())["type"] == "cni-delguard"
        finally:
            watcher.terminate()
            _, err = watcher.communicate(timeout=30)
        assert "unwrapping" not in err, err
    assert list(out.iterdir()) == []
