"""A distribution's own upgrade under a running `install --watch` (issue 30), on fake node roots.

The watcher is the frozen binary (or the package, installing the frozen bundle) as the DaemonSet
runs it: `install --watch --root R`, no path flag, the layout found by `auto`. Then the
distribution moves its dirs the way its own upgrade does:

- `k3s-release`: k3s before its October 2024 releases. containerd's bin_dir is the running
  release's data/<hash>/bin; an upgrade unpacks a new <hash> dir, moves data/current to it (an
  absolute link) and removes the old one. The conf dir stays.
- `k3s-data-cni`: k3s upgrading into the October 2024 releases: data/cni appears and is the bin
  dir from then on (the old release dir stays until k3s prunes it).
- `microk8s-refresh`: `snap refresh` copies SNAP_DATA (the revision dir, conf and guard
  included) to the new revision, moves `current` (a relative link) to it, and multus then
  writes its conf anew in the new revision's args/cni-network, unwrapped.

After each: the plugin is where the runtime now looks, and runs there with the node's root as /
(a DEL with no evidence, chrooted into R with CNI_PATH the new bin dir: exit 0, skipped, logged);
the conf the runtime now reads names the guard; `ready --root R` passes. How long the node was
between the move and a passing `ready` is printed (no assertion on time: the watcher polls every
0.2 s here; benchmarks.layout_moves measures the window at the default interval).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.fakenode import Node, wrapped
from tests.support.installerproc import WatchProc, command
from tests.support.mounts import mount, umount
from tests.support.waiting import wait_for

K3S_DATA = "/var/lib/rancher/k3s/data"
K3S_CONF = "/var/lib/rancher/k3s/agent/etc/cni/net.d"
SNAP = "/var/snap/microk8s"


@pytest.fixture
def watcher(fake_node: Node, tmp_path: Path) -> Iterator[Callable[..., WatchProc]]:
    procs: list[WatchProc] = []

    def start(*extra: str) -> WatchProc:
        procs.append(WatchProc(fake_node, tmp_path, *extra))
        return procs[-1]

    yield start
    for proc in procs:
        assert proc.stop() == 0, proc.text()
        assert "Traceback" not in proc.text(), proc.text()


def guarded(node: Node, proc: WatchProc, conf: Path, what: str) -> float:
    """Wait until the conf is wrapped and `ready` passes; the seconds it took."""
    start = time.monotonic()
    wait_for(lambda: wrapped(conf) and node.ready().returncode == 0, what, 60,
             detail=lambda: proc.text() + node.ready().stdout)
    return time.monotonic() - start


def guarded_k3s_release(node: Node, watcher: Callable[[], WatchProc],
                        release: str) -> tuple[Path, WatchProc]:
    """A k3s node running release `release` (data/<hash>/bin), guarded by a watcher."""
    node.bin_dir(f"{K3S_DATA}/{release}/bin")
    node.link(f"{K3S_DATA}/current", f"{K3S_DATA}/{release}")
    conf = node.conf(K3S_CONF)
    w = watcher()
    guarded(node, w, conf, "guarded at start")
    return conf, w


def test_k3s_release_dir_upgrade_gets_the_guard_in_the_new_release(fake_node, watcher):
    node = fake_node
    conf, w = guarded_k3s_release(node, watcher, "8e61313beb4e")

    node.bin_dir(f"{K3S_DATA}/a1b2c3d4e5f6/bin")  # the new release, unpacked by k3s
    node.link(f"{K3S_DATA}/current", f"{K3S_DATA}/a1b2c3d4e5f6")
    shutil.rmtree(node.path(f"{K3S_DATA}/8e61313beb4e"))  # and the old one removed
    took = guarded(node, w, conf, "guarded in the new release")
    print(f"k3s release-dir upgrade: ready again after {took:.2f} s")
    assert node.path(f"{K3S_DATA}/a1b2c3d4e5f6/bin/cni-delguard").is_symlink()
    node.skipped_del(f"{K3S_DATA}/a1b2c3d4e5f6/bin", conf, "k3s-release-0123456789")
    assert "bin dir moved" in w.text()


def test_k3s_moving_to_data_cni_gets_the_guard_there(fake_node, watcher):
    node = fake_node
    conf, w = guarded_k3s_release(node, watcher, "8e61313beb4e")

    tmp = node.bin_dir(f"{K3S_DATA}/.cni-unpack")
    os.rename(tmp, node.path(f"{K3S_DATA}/cni"))  # the October 2024 release's fixed bin dir
    took = guarded(node, w, conf, "guarded in data/cni")
    wait_for(node.path(f"{K3S_DATA}/cni/cni-delguard").is_symlink, "the guard in data/cni", 60,
             detail=w.text)
    print(f"k3s into data/cni: ready again after {took:.2f} s")
    node.skipped_del(f"{K3S_DATA}/cni", conf, "k3s-data-cni-0123456789")


def test_microk8s_refresh_then_a_regenerated_conf_is_wrapped_in_the_new_revision(
    fake_node, watcher
):
    node = fake_node
    node.bin_dir(f"{SNAP}/7229/opt/cni/bin")
    node.link(f"{SNAP}/current", "7229")  # snapd's relative link
    old_conf = node.conf(f"{SNAP}/7229/args/cni-network")
    w = watcher()
    guarded(node, w, old_conf, "guarded at start")

    # snap refresh: SNAP_DATA copied to the new revision, then current moved to it.
    shutil.copytree(node.path(f"{SNAP}/7229"), node.path(f"{SNAP}/7300"), symlinks=True)
    node.link(f"{SNAP}/current", "7300")
    conf = node.conf(f"{SNAP}/7300/args/cni-network")  # multus regenerates its conf
    took = guarded(node, w, conf, "the new revision's conf wrapped")
    print(f"microk8s refresh + regenerated conf: ready again after {took:.2f} s")
    node.skipped_del(f"{SNAP}/7300/opt/cni/bin", conf, "microk8s-refresh-0123456789")
    assert "conf dir moved" in w.text()


def live(path: Path) -> subprocess.CompletedProcess[str]:
    """The liveness probe, with no grace: a failure to install counts at once."""
    return subprocess.run([*command(), "live", "--live-file", str(path), "--grace", "0"],
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_new_release_dir_the_pod_cannot_write_unwraps_and_fails_liveness(
    fake_node, watcher, tmp_path
):
    """The new release's bin dir is read-only to the watcher (a hostPath the kubelet resolved
    through a link at pod start, say): the conf is unwrapped (it must not name a guard the
    runtime cannot find), `live` fails with 15, so the kubelet restarts the pod; once the dir
    can be written (the restarted pod's mounts) the guard lands there and is wrapped again."""
    node = fake_node
    node.bin_dir(f"{K3S_DATA}/8e61313beb4e/bin")
    node.link(f"{K3S_DATA}/current", f"{K3S_DATA}/8e61313beb4e")
    conf = node.conf(K3S_CONF)
    original = conf.read_bytes()
    heartbeat = tmp_path / "live"
    w = watcher("--live-file", str(heartbeat))
    guarded(node, w, conf, "guarded at start")
    assert live(heartbeat).returncode == 0

    new_bin = node.bin_dir(f"{K3S_DATA}/a1b2c3d4e5f6/bin")
    mount("--bind", str(new_bin), str(new_bin))
    try:
        mount("-o", "remount,bind,ro", str(new_bin))
        node.link(f"{K3S_DATA}/current", f"{K3S_DATA}/a1b2c3d4e5f6")
        wait_for(lambda: conf.read_bytes() == original, "the node's own conf back", 60,
                 detail=w.text)
        wait_for(lambda: live(heartbeat).returncode == 15, "live failing", 60,
                 detail=lambda: w.text() + live(heartbeat).stdout)
        assert "cannot be installed into" in live(heartbeat).stdout
        assert node.ready().returncode == 10
    finally:
        umount(new_bin)
    guarded(node, w, conf, "guarded once the new release dir can be written")
    assert live(heartbeat).returncode == 0
    node.skipped_del(f"{K3S_DATA}/a1b2c3d4e5f6/bin", conf, "k3s-readonly-0123456789")
