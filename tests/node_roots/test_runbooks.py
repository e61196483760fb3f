"""The runbooks' commands on a node of each layout (tests/support/runbooks.py reads them from the
docs and the alerts, as tests/installer/test_runbooks.py does for the image on one node).

A node root of each case of test_layouts (k3s before and after its 2024 move of the CNI bins,
MicroK8s with and without its links, RKE2, OpenShift, Talos, standard), guarded by `install`, is
what the DaemonSet's pod sees at /host: each command the page runs in that pod runs here with the
frozen binary, `--root` the node root and LAYOUT the layout (the DaemonSet's `--layout` for that
overlay), in document order and once each. The page's `doctor --json` gives the node's dirs, as
the page says to set them; each command the page runs in a shell on the node runs on them, with
Debian's static busybox (what the page's `busybox` image is), so a dir that is not where that
layout keeps it fails there (as `/host/opt/cni/bin` did on k3s, MicroK8s and OpenShift).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from cni_delguard.host.layouts import BY_NAME
from tests.support import guard, runbooks
from tests.support.noderoot import BUSYBOX

from .test_layouts import CASES, node  # noqa: F401 - the fixture, one node per case

# What each tool may answer (its documented exit codes; 2 is a usage error, never allowed).
OK_CODES = {"doctor": {0, 1}, "ready": {0, 10, 11, 12, 13}}
COMMANDS = runbooks.all_commands()
ON_NODE_TOOLS = {"df", "ls", "netstat"}


def unique(kind: str) -> list[str]:
    return list(dict.fromkeys(c for c in COMMANDS if runbooks.kind(c) == kind))


def in_the_pod(root: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """ARGV as the watcher's pod runs it, /host being the node root."""
    assert argv[0] == "cni-delguard"
    args = [root if a == "/host" else a for a in argv[1:]]
    if args[0] == "install" and guard.under_test() != "frozen":
        args += ["--bundle-dir", str(guard.frozen_binary().parent)]
    return subprocess.run([*guard.guard_argv(), *args], capture_output=True, text=True,
                          timeout=300, check=False)


def test_the_runbooks_commands_run_on_a_node_of_each_layout(node):  # noqa: F811 - the fixture
    installed = node.tool("install")
    assert installed.returncode == 0, installed.stderr
    node.delete("runbook-0123456789")  # a DEL the guard skips: the node's decision log begins
    page = {"NODE": "node-1", "NS": "kube-system", "POD": "pod/cni-delguard-x",
            "LAYOUT": node.layout.name, "PATH": os.environ["PATH"]}
    dirs: dict[str, str] = {}
    for command in unique("exec"):
        m = runbooks.EXEC.match(runbooks.FINDER.sub("$POD", command))
        argv = runbooks.expand(m[3], page)
        assert argv[4:6] == ["--layout", node.layout.name], command
        r = in_the_pod(str(node.root), argv)
        said = r.stdout + r.stderr
        assert "Traceback" not in said and said.strip(), (command, said)
        assert r.returncode in OK_CODES.get(argv[1], {0}), (command, r.returncode, said)
        if argv[1] == "doctor" and "--json" in argv:
            report = json.loads(r.stdout)
            assert report["layout"] == node.layout.name
            dirs = {"BIN_DIR": report["binDir"], "CONF_DIR": report["confDir"],
                    "STATE_DIR": report["stateDir"]}
    assert dirs, "the page sets the node's dirs from doctor --json"
    assert os.path.realpath(dirs["BIN_DIR"]) == os.path.realpath(node.bin_dir)
    assert os.path.realpath(dirs["CONF_DIR"]) == os.path.realpath(node.conf.parent)
    on_node = unique("on-node")
    assert {runbooks.expand(runbooks.ON_NODE.match(c)[4], page)[0] for c in on_node} == (
        ON_NODE_TOOLS)
    for command in on_node:
        argv = runbooks.expand(runbooks.ON_NODE.match(command)[4], {**page, **dirs})
        r = subprocess.run([str(BUSYBOX), *argv], capture_output=True, text=True, timeout=60,
                           check=False)
        assert r.returncode == 0 and r.stdout.strip(), (command, argv, r.stderr)
        if argv[0] == "ls":
            assert node.conf.name in r.stdout


@pytest.mark.parametrize("name", ["k3s", "microk8s", "openshift"])
def test_the_standard_dirs_are_not_where_these_layouts_keep_them(name):
    """Why the page reads the dirs from doctor: the values it shows are the standard layout's."""
    standard = runbooks.value_of("BIN_DIR", {})
    layout = CASES[name][0]
    assert standard == "/host" + BY_NAME["standard"].bin_dirs[0]
    assert "/host" + BY_NAME[layout].bin_dirs[0] != standard
