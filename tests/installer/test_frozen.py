"""The installer as shipped: the frozen one-folder binary installing itself.

Runs the frozen build (tests/support/guard.py: DELGUARD_BIN, or dist/ from tools/build.sh);
skipped with DELGUARD_UNDER_TEST=package, where there is no bundle to install.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time

import pytest

from tests.support import guard
from tests.support.guard import HOST_ARCH

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
