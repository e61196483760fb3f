"""The frozen guard on hosts whose userland is not the build machine's (issue 17).

The runtime execs a plugin with the host's own userland. Here the bundle is installed with
`install --root R` into a node root R, and then run the way the runtime runs it, with R as /
(chroot R), never through this machine's libraries:

- `bullseye`: Debian 11, glibc 2.31 (older than the 2.35 the bundle's own libpython needs), made
  with debootstrap (tools/make-root.sh), with Debian 11's own containernetworking-plugins (0.9.0):
  the delegate is its `loopback`, in a real network namespace bind-mounted into R;
- `no-libc`: only directories, the conf and a static test delegate (tests/fakes/static_delegate):
  a host with no C library at all, as Talos without its glibc extension, or a musl host.

On each: VERSION answers; a DEL with no evidence skips (exit 0, nothing on stdout, logged); an ADD
through the delegate returns the delegate's result; the DEL after it reaches the delegate;
`ready --root R` and `doctor --root R` pass; `uninstall --root R` restores the conf byte for byte.
/proc is mounted in R, as every host has it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import guard, staticfake
from tests.support.netns import Netns, NetnsSet, ip
from tests.support.noderoot import bound_file, needs_root, overlay, proc_mounted
from tests.support.records import guard_log

REPO = Path(__file__).resolve().parents[2]
DEB_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}[os.uname().machine]
CHROOT = "/usr/sbin/chroot"


@dataclass
class NodeRoot:
    root: Path
    conf_name: str
    conf: dict[str, Any]
    netns: Netns
    attached: Callable[[], bool]  # the delegate's own evidence that the attachment is there

    @property
    def conf_path(self) -> Path:
        return self.root / "etc/cni/net.d" / self.conf_name

    def plugin_stdin(self, prev_result: Any = None) -> dict[str, Any]:
        """What libcni hands the first plugin of the (wrapped) conflist."""
        conf = json.loads(self.conf_path.read_text())
        entry = conf["plugins"][0] | {"name": conf["name"], "cniVersion": conf["cniVersion"]}
        if prev_result is not None:
            entry["prevResult"] = prev_result
        return entry

    def run_plugin(self, command: str, stdin: dict[str, Any]) -> tuple[int, Any]:
        """The guard exec'd as the runtime execs it, with this root as /."""
        return guard.exec_cni(Path("/opt/cni/bin"), command, stdin, cid="anyhost-0123456789",
                              netns_path=f"/run/netns/{self.netns.name}",
                              prefix=(CHROOT, str(self.root)))

    def decisions(self) -> list[str]:
        log = self.root / "var/log/cni-delguard/delguard.log"
        return [f"{line['command']}:{line['decision']}" for line in guard_log(log)]


def installer(*argv: str) -> subprocess.CompletedProcess[str]:
    """The frozen binary's operator commands, run from this machine's view (as the DaemonSet's
    container runs them, with the node at --root)."""
    return subprocess.run([str(guard.frozen_binary()), *argv], capture_output=True, text=True,
                          timeout=120, check=False)


def lo_up(ns: Netns) -> bool:
    flags = ns.links()["lo"].get("flags", [])
    return isinstance(flags, list) and "UP" in flags


@contextlib.contextmanager
def bullseye(tmp: Path, ns: Netns) -> Iterator[NodeRoot]:
    template = subprocess.run(
        [str(REPO / "tools/make-root.sh"), "bullseye", DEB_ARCH, "containernetworking-plugins"],
        capture_output=True, text=True, check=True, timeout=1800,
    ).stdout.strip()
    with overlay(Path(template), tmp / "bullseye") as root:
        (root / "opt/cni/bin").mkdir(parents=True)
        (root / "opt/cni/bin/loopback").symlink_to("../../../usr/lib/cni/loopback")
        (root / "etc/cni/net.d").mkdir(parents=True)
        conf = {"cniVersion": "0.4.0", "name": "lo-net", "plugins": [{"type": "loopback"}]}
        ip("-n", ns.name, "link", "set", "lo", "down")
        yield NodeRoot(root, "10-lo.conflist", conf, ns, lambda: lo_up(ns))


@contextlib.contextmanager
def no_libc(tmp: Path, ns: Netns) -> Iterator[NodeRoot]:
    root = tmp / "no-libc"
    for d in ("opt/cni/bin", "etc/cni/net.d", "tmp", "proc", "run/netns", "var"):
        (root / d).mkdir(parents=True)
    (root / "tmp").chmod(0o1777)
    staticfake.build(root / "opt/cni/bin/static-fake")
    conf = {"cniVersion": "1.0.0", "name": "static-net",
            "plugins": [{"type": "static-fake", "stateDir": "/tmp",
                         "recordFile": "/tmp/calls.jsonl"}]}

    yield NodeRoot(root, "10-static.conflist", conf, ns,
                   (root / "tmp/anyhost-0123456789:eth0").exists)


ROOTS = {"bullseye": bullseye, "no-libc": no_libc}


@pytest.fixture(params=list(ROOTS))
def node(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[NodeRoot]:
    needs_root()
    guard.frozen_or_skip()
    namespaces = NetnsSet(prefix="dgany")
    with contextlib.ExitStack() as stack:
        stack.callback(namespaces.close)
        ns = namespaces.new()
        made = stack.enter_context(ROOTS[request.param](tmp_path, ns))
        stack.enter_context(proc_mounted(made.root))
        stack.enter_context(bound_file(ns.path, made.root, f"/run/netns/{ns.name}"))
        made.conf_path.write_text(json.dumps(made.conf, indent=1) + "\n")
        yield made


def test_installed_guard_runs_there_as_the_runtime_runs_it(node: NodeRoot) -> None:
    original = node.conf_path.read_bytes()
    delegate = node.conf["plugins"][0]["type"]
    r = installer("install", "--root", str(node.root), "--wrap", delegate)
    assert r.returncode == 0, r.stderr
    assert json.loads(node.conf_path.read_text())["plugins"][0]["type"] == "cni-delguard"
    r = installer("ready", "--root", str(node.root))
    assert r.returncode == 0, r.stdout + r.stderr
    r = installer("doctor", "--root", str(node.root), "--json")
    plugins = [f for f in json.loads(r.stdout)["findings"] if f["check"] == "plugins"]
    assert plugins and all(f["severity"] == "ok" for f in plugins), plugins

    code, out = node.run_plugin("VERSION", {"cniVersion": "1.0.0"})
    assert code == 0 and "1.0.0" in out["supportedVersions"], out
    assert not node.attached()
    code, out = node.run_plugin("DEL", node.plugin_stdin())
    assert (code, out) == (0, None)
    code, result = node.run_plugin("ADD", node.plugin_stdin())
    assert code == 0, result
    assert result["interfaces"][0]["name"] in ("lo", "eth0"), result
    assert node.attached()  # the delegate's ADD did its work
    code, out = node.run_plugin("DEL", node.plugin_stdin(prev_result=result))
    assert (code, out) == (0, None)
    assert not node.attached()  # the delegate's DEL undid it
    assert node.decisions() == ["DEL:skip", "ADD:add-completed", "DEL:forward-strict"]

    r = installer("uninstall", "--root", str(node.root))
    assert r.returncode == 0, r.stderr
    assert node.conf_path.read_bytes() == original
    assert not (node.root / "opt/cni/bin/cni-delguard").exists()
