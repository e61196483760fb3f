"""The installer and the operator tools on a node root of each layout (host/layouts.py), with no
path flag: `--layout auto` has to find the layout from what the distribution leaves on its nodes.

Each root (with /proc mounted, as every node has it) holds what that distribution has where the
guard looks (its conf dir and bin dir, k3s's data/current link, MicroK8s' revision link, RKE2's
data dir, Talos' CRI config) and a multus conf in its conf dir. The "multus" there is the static
fake delegate (tests/fakes/static_delegate, FAKE: it records each call in the node root, and does
nothing outside it: its files are under /delguard-fake, a dir no host has), so the root needs no
C library; the guard is the frozen bundle, which runs in any root. The installer runs as the
frozen binary (the product) and as the package (DELGUARD_UNDER_TEST=package), installing the
frozen bundle.

For each: `install --root R` wraps the layout's conf and copies the bundle into its bin dir;
`ready` and `doctor` pass and doctor names the layout; a DEL through the wrapped conf, run chrooted
into R as the runtime runs it, finds the libcni result cache planted where the layout's runtime
keeps it and is forwarded strict (the decision log says so, and the delegate got it), while a DEL
with no cache is skipped; `stats` and `list` read the layout's log and state dir; `uninstall`
restores the conf byte for byte. A root where two layouts' conf dirs hold a conf is refused
(exit 2, one line) by every command, and nothing is written.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cni_delguard.host.layouts import BY_NAME, Layout
from tests.support import guard
from tests.support.noderoot import needs_root, proc_mounted
from tests.support.records import fake_calls, guard_log

CHROOT = "/usr/sbin/chroot"
NETWORK = "multus-cni-network"
CACHED, UNCACHED = "layout-cached-0123456789", "layout-never-added-0123456789"
FAKE_DIR = "/delguard-fake"  # the fake delegate's files, inside the node root only
MULTUS_CONF = {
    "cniVersion": "1.0.0",
    "name": NETWORK,
    "type": "multus",
    "stateDir": FAKE_DIR,
    "recordFile": f"{FAKE_DIR}/calls.jsonl",
}


def mkdir(root: Path, path: str) -> Path:
    target = root / path.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    return target


def k3s_release(root: Path) -> Path:
    """A k3s release's data dir and data/current linking to it by its absolute host path, as
    k3s leaves them (k3s issue 6118 shows the link)."""
    release = mkdir(root, "/var/lib/rancher/k3s/data/8e61313beb4e/bin")
    (root / "var/lib/rancher/k3s/data/current").symlink_to("/var/lib/rancher/k3s/data/8e61313beb4e")
    return release


def standard(root: Path) -> str:
    return str(mkdir(root, "/opt/cni/bin"))


def k3s_new(root: Path) -> str:
    k3s_release(root)  # still there, but since October 2024 the CNI bins are in data/cni
    return str(mkdir(root, "/var/lib/rancher/k3s/data/cni"))


def k3s_old(root: Path) -> str:
    return str(k3s_release(root))


def rke2(root: Path) -> str:
    mkdir(root, "/var/lib/rancher/rke2/agent")
    return standard(root)


def microk8s(root: Path) -> str:
    mkdir(root, "/var/snap/microk8s/7229")
    (root / "var/snap/microk8s/current").symlink_to("7229")  # snapd's relative link
    return str(mkdir(root, "/var/snap/microk8s/7229/opt/cni/bin"))


def microk8s_links(root: Path) -> str:
    """MicroK8s 1.29 and later also link /etc/cni/net.d and /opt/cni/bin into the snap: the
    same dirs twice, one node (no --layout needed)."""
    bin_dir = microk8s(root)
    mkdir(root, "/etc/cni")
    mkdir(root, "/opt/cni")
    (root / "etc/cni/net.d").symlink_to("/var/snap/microk8s/current/args/cni-network")
    (root / "opt/cni/bin").symlink_to("/var/snap/microk8s/current/opt/cni/bin")
    return bin_dir


def openshift(root: Path) -> str:
    return str(mkdir(root, "/var/lib/cni/bin"))


def talos(root: Path) -> str:
    mkdir(root, "/etc/cri").joinpath("containerd.toml").write_text("version = 2\n")
    return standard(root)


# case: (layout, what the distribution leaves; returns the bin dir as seen from here)
CASES: dict[str, tuple[str, Callable[[Path], str]]] = {
    "standard": ("standard", standard),
    "k3s": ("k3s", k3s_new),
    "k3s-before-2024-10": ("k3s", k3s_old),
    "rke2": ("rke2", rke2),
    "microk8s": ("microk8s", microk8s),
    "microk8s-1.29-links": ("microk8s", microk8s_links),
    "openshift": ("openshift", openshift),
    "talos": ("talos", talos),
}


@dataclass
class Node:
    root: Path
    layout: Layout
    bin_dir: Path  # the real dir, as seen from here

    @property
    def conf(self) -> Path:
        return self.root / self.layout.conf_dir.lstrip("/") / "00-multus.conf"

    def tool(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """The operator's command as the DaemonSet's container runs it: --root, no path flag.
        The package installs the frozen bundle (--bundle-dir); the frozen binary its own."""
        extra = [] if argv[0] != "install" or guard.under_test() == "frozen" else [
            "--bundle-dir", str(guard.frozen_binary().parent)]
        proc = subprocess.run([*guard.guard_argv(), *argv, "--root", str(self.root), *extra],
                              capture_output=True, text=True, timeout=300, check=False)
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc

    def on_node(self, path: Path) -> str:
        return "/" + str(path.relative_to(self.root))

    def delete(self, cid: str) -> tuple[int, object]:
        """DEL through the wrapped conf, run as the runtime runs it: chrooted into the node,
        CNI_PATH the layout's bin dir, the conf file on stdin."""
        return guard.exec_cni(Path(self.on_node(self.bin_dir)), "DEL", self.conf.read_bytes(),
                              cid=cid, prefix=(CHROOT, str(self.root)))

    def plant_result_cache(self, cid: str) -> Path:
        """libcni's cache of a completed ADD (libcni api.go cachedInfo), where the layout's
        runtime keeps it."""
        cache = self.root / self.layout.result_cache_dirs[0].lstrip("/")
        cache.mkdir(parents=True, exist_ok=True)
        path = cache / f"{NETWORK}-{cid}-eth0"
        result = {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0"}],
                  "ips": [{"address": "10.99.0.2/24", "interface": 0}]}
        path.write_text(json.dumps({"kind": "cniCacheV1", "containerId": cid, "ifName": "eth0",
                                    "networkName": NETWORK, "config": "", "result": result}))
        return path


@pytest.fixture(params=list(CASES))
def node(
    request: pytest.FixtureRequest, tmp_path: Path, static_fake: Path
) -> Iterator[Node]:
    needs_root()
    guard.frozen_or_skip()
    name, leave = CASES[request.param]
    root = tmp_path / "node"
    bin_dir = Path(leave(root))
    for d in ("/var/log", FAKE_DIR):
        mkdir(root, d)
    (bin_dir / "multus").write_bytes(static_fake.read_bytes())
    (bin_dir / "multus").chmod(0o755)
    made = Node(root, BY_NAME[name], bin_dir)
    made.conf.parent.mkdir(parents=True, exist_ok=True)
    made.conf.write_text(json.dumps(MULTUS_CONF, indent=1) + "\n")
    with proc_mounted(root):  # as every node has it (the guard's chmod of a dir needs it)
        yield made


def test_install_with_no_path_flag_guards_the_layouts_conf_and_uninstall_restores_it(node):
    original = node.conf.read_bytes()
    r = node.tool("install")
    assert r.returncode == 0, r.stderr
    assert f"{node.conf.resolve()}: wrapped 'multus'" in r.stderr  # links followed in the root
    wrapped = json.loads(node.conf.read_text())
    assert (wrapped["type"], wrapped["delegate"]["type"]) == ("cni-delguard", "multus")
    assert (node.bin_dir / "cni-delguard").is_symlink()
    assert (node.bin_dir / "cni-delguard").resolve().parent.name.startswith(".cni-delguard-")

    r = node.tool("ready")
    assert r.returncode == 0, r.stdout + r.stderr
    r = node.tool("doctor", "--json")
    report = json.loads(r.stdout)
    assert report["layout"] == node.layout.name
    assert r.returncode == 0 and report["healthy"], report

    node.plant_result_cache(CACHED)
    for cid in (CACHED, UNCACHED):
        code, out = node.delete(cid)
        assert (code, out) == (0, None), out
    log = node.root / node.layout.log_file.lstrip("/")
    decisions = {line["containerID"]: line for line in guard_log(log, command="DEL")}
    assert decisions[CACHED]["decision"] == "forward-strict"
    assert any("libcni" in str(e) for e in decisions[CACHED]["evidence"]), decisions[CACHED]
    assert decisions[UNCACHED]["decision"] == "skip"
    calls = fake_calls(node.root / FAKE_DIR.lstrip("/") / "calls.jsonl", command="DEL")
    assert [c["containerID"] for c in calls] == [CACHED]  # the skipped DEL never reached it

    stats = json.loads(node.tool("stats", "--json").stdout)
    assert stats["decisions"] == {"DEL forward-strict": 1, "DEL skip": 1}, stats
    assert node.tool("list", "--json").returncode == 0

    r = node.tool("uninstall")
    assert r.returncode == 0, r.stderr
    assert node.conf.read_bytes() == original
    assert not (node.bin_dir / "cni-delguard").exists()


def test_a_root_with_two_layouts_confs_is_refused_by_every_command(node):
    other = BY_NAME["k3s" if node.layout.name != "k3s" else "standard"]
    stray = node.root / other.conf_dir.lstrip("/") / "10-flannel.conflist"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_text('{"cniVersion": "1.0.0", "name": "cbr0", "plugins": [{"type": "flannel"}]}\n')
    before = node.conf.read_bytes()
    for argv in (["install"], ["uninstall"], ["ready"], ["doctor"]):
        r = node.tool(*argv)
        assert r.returncode == 2, (argv, r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1, r.stderr
        assert "more than one layout" in r.stderr
        assert f"{node.layout.name}: " in r.stderr and f"{other.name}: " in r.stderr
    assert node.conf.read_bytes() == before
    assert not (node.bin_dir / "cni-delguard").exists()
    assert not (node.root / "var/lib/cni/delguard").exists()
    r = node.tool("install", "--layout", node.layout.name)  # naming it settles it
    assert r.returncode == 0, r.stderr
