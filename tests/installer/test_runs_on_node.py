"""The installer and `ready` ask whether the plugin runs the way the runtime will run it: with the
node's root as / (a chroot into --root), never through the installer image's own userland.

A plugin can run from the installer's view and not at all on the node: here a bundle whose
executable is a `#!/bin/sh` script answering VERSION (it runs from this machine, which has a
/bin/sh), installed into a node root that has no /bin/sh (as a Talos node has none). Before issue
17 the installer wrapped such a node and `ready` called it guarded; every ADD and DEL through the
conf would then have failed. Now the wrap is refused (exit 5, one line saying why, the conf as it
was) and `ready` says the plugin does not run there (exit 12).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.installerproc import installer
from tests.support.noderoot import needs_root

from .conftest import MULTUS_CONF, make_bundle


def test_a_plugin_that_cannot_run_on_the_node_is_never_wrapped_in(node, tmp_path: Path) -> None:
    needs_root()
    shell, away = node.root / "bin", node.root / "bin.away"
    shell.rename(away)  # this node has no shell at all
    src = make_bundle(tmp_path / "sh-bundle", "sh")
    here = subprocess.run([src / "cni-delguard"], env={"CNI_COMMAND": "VERSION"},
                          capture_output=True, text=True, check=False)
    assert here.returncode == 0 and "supportedVersions" in here.stdout  # runs from here
    path = node.write_conf("00-multus.conf", MULTUS_CONF)

    r = installer(node, "install", "--bundle-dir", str(src))
    assert r.returncode == 5, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert f"with {node.root} as /" in r.stderr
    assert "`#!/bin/sh` is missing there" in r.stderr
    assert path.read_text() == MULTUS_CONF

    away.rename(shell)  # with a shell it runs there: wrapped, and ready
    assert installer(node, "install", "--bundle-dir", str(src)).returncode == 0
    assert installer(node, "ready").returncode == 0
    shell.rename(away)  # the node loses its shell: the plugin no longer runs there
    r = installer(node, "ready")
    assert r.returncode == 12, r.stdout
    assert "`#!/bin/sh` is missing there" in r.stdout


ENV_ON_VERSION = """env > /tmp/probe.env
echo '{"cniVersion":"1.0.0","supportedVersions":["1.0.0"]}'
"""


def test_the_probe_takes_no_environment_from_the_nodes_proc(node) -> None:
    """The probe runs the plugin with CNI_COMMAND=VERSION and nothing else (issue 38, item 2):
    no process's environment is read from the node's /proc, whatever its name. Here the node's
    /proc is a stand-in holding a process named containerd with LD_PRELOAD and LD_DEBUG in its
    environ (the real-process version is tests/installer/test_frozen.py's impostor test)."""
    from cni_delguard.node import runs
    from tests.support.noderoot import shell_plugin

    containerd = node.root / "proc" / "4242"
    containerd.mkdir(parents=True)
    (containerd / "comm").write_text("containerd\n")
    (containerd / "environ").write_bytes(b"LD_PRELOAD=/lib/libedr.so\0LD_DEBUG=help\0PATH=/bin\0")
    (node.root / "tmp").mkdir()
    plugin = shell_plugin(node.bin / "probe-me", ENV_ON_VERSION)
    versions, why = runs.answers_version(str(plugin), str(node.root))
    assert versions == ["1.0.0"], why
    seen = dict(line.split("=", 1) for line in (node.root / "tmp/probe.env").read_text().split("\n")
                if "=" in line)
    shells_own = ("PATH", "PWD", "SHLVL")  # what busybox's sh sets itself
    assert {k: v for k, v in seen.items() if k not in shells_own} == {"CNI_COMMAND": "VERSION"}
