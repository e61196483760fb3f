"""Ask the runtime (issue 30): where the node's runtime config names the CNI dirs, `install`,
`ready` and `doctor` use them, not the layout table's, on fake node roots (the frozen installer,
or the package installing the frozen bundle; no path flag):

- `containerd-custom`: a kubeadm-like node whose /etc/containerd/config.toml imports a drop-in
  that puts CRI's bin dir at /usr/libexec/cni (as some distributions' packages do);
- `k3s-no-flannel`: k3s with --flannel-backend=none writes its containerd config with no cni
  table, so containerd's defaults apply: `--layout k3s` (the k3s overlay) finds /etc/cni/net.d
  and /opt/cni/bin, where Calico or Cilium put their conf;
- `k3s-data-dir`: k3s started with a custom --data-dir (its /etc/rancher/k3s/config.yaml), whose
  containerd config, under that dir, names the dirs there;
- `crio-openshift`: CRI-O's crio.conf.d drop-in names the plugin dir.

In each, the plugin lands in the dir the runtime names and answers a DEL there chrooted into the
root, the conf there is wrapped, `ready` passes, and doctor's JSON names the runtime's config as
the source of the dirs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support import guard
from tests.support.fakenode import Node, wrapped
from tests.support.installerproc import command
from tests.support.records import guard_log

CASES = {
    "containerd-custom": (
        "standard", "/etc/cni/net.d", "/usr/libexec/cni",
        {"/etc/containerd/config.toml":
             'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n',
         "/etc/containerd/conf.d/50-cni.toml":
             'version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\n'
             'bin_dir = "/usr/libexec/cni"\nconf_dir = "/etc/cni/net.d"\n'},
        "containerd /etc/containerd/config.toml + 1 import(s)"),
    "k3s-no-flannel": (
        "k3s", "/etc/cni/net.d", "/opt/cni/bin",
        {"/var/lib/rancher/k3s/agent/etc/containerd/config.toml":
             'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
             'snapshotter = "overlayfs"\n'},
        "containerd /var/lib/rancher/k3s/agent/etc/containerd/config.toml"),
    "k3s-data-dir": (
        "k3s", "/srv/k3s/agent/etc/cni/net.d", "/srv/k3s/data/cni",
        {"/etc/rancher/k3s/config.yaml": "data-dir: /srv/k3s\n",
         "/srv/k3s/agent/etc/containerd/config.toml":
             'version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\n'
             'bin_dir = "/srv/k3s/data/cni"\nconf_dir = "/srv/k3s/agent/etc/cni/net.d"\n'},
        "containerd /srv/k3s/agent/etc/containerd/config.toml"),
    "crio-openshift": (
        "openshift", "/etc/kubernetes/cni/net.d", "/usr/libexec/cni",
        {"/etc/crio/crio.conf": '[crio.network]\nnetwork_dir = "/etc/kubernetes/cni/net.d/"\n',
         "/etc/crio/crio.conf.d/10-plugins.conf":
             '[crio.network]\nplugin_dirs = ["/usr/libexec/cni", "/var/lib/cni/bin"]\n'},
        "CRI-O /etc/crio/crio.conf + /etc/crio/crio.conf.d"),
}


def tool(node: Node, *argv: str) -> subprocess.CompletedProcess[str]:
    extra = node.args()[2:] if argv[0] == "install" else []
    proc = subprocess.run([*command(), *argv, "--root", str(node.root), *extra],
                          capture_output=True, text=True, timeout=300, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.mark.parametrize("case", list(CASES))
def test_the_dirs_the_runtimes_config_names_are_used(fake_node, case):
    node = fake_node
    layout, conf_dir, bin_dir, files, source = CASES[case]
    for path, text in files.items():
        target = node.path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    node.bin_dir(bin_dir)
    conf = node.conf(conf_dir)
    r = tool(node, "install", "--layout", layout)
    assert r.returncode == 0, r.stderr
    assert wrapped(conf)
    assert node.path(f"{bin_dir}/cni-delguard").is_symlink()
    r = tool(node, "ready", "--layout", layout)
    assert r.returncode == 0, r.stdout
    report = json.loads(tool(node, "doctor", "--layout", layout, "--json").stdout)
    assert report["dirsFrom"] == source and report["healthy"], report
    node.skipped_del(bin_dir, conf, f"{case}-0123456789")


@pytest.mark.parametrize("how", ["daemon-config", "flag"])
def test_multus_thicks_non_default_cni_dir_is_where_the_guard_looks(fake_node, how):
    """Thick multus with cniDir /var/lib/cni/multus-thick in its daemon config: read from the
    node when the config is there (multus.d/daemon-config.json in the conf dir), else named
    with --multus-cache-dir. A DEL whose only evidence is that cache is forwarded, not
    skipped."""
    node = fake_node
    thick_dir = "/var/lib/cni/multus-thick"
    bin_dir = node.bin_dir("/opt/cni/bin")
    (bin_dir / "multus").rename(bin_dir / "multus-shim")
    conf = node.path("/etc/cni/net.d/00-multus.conf")
    conf.parent.mkdir(parents=True)
    conf.write_text(json.dumps({"cniVersion": "1.0.0", "name": "multus-cni-network",
                                "type": "multus-shim", "stateDir": "/delguard-fake",
                                "recordFile": "/delguard-fake/calls.jsonl"}))
    extra: list[str] = []
    if how == "daemon-config":
        daemon = node.path("/etc/cni/net.d/multus.d/daemon-config.json")
        daemon.parent.mkdir()
        daemon.write_text(json.dumps({"chrootDir": "/hostroot", "cniDir": thick_dir}))
    else:
        extra = ["--multus-cache-dir", thick_dir]
    r = tool(node, "install", *extra)
    assert r.returncode == 0, r.stderr
    assert json.loads(conf.read_text())["multusCacheDirs"] == [thick_dir, "/var/lib/cni/multus"]
    cid = f"thick-{how}-0123456789"
    cache = node.path(f"{thick_dir}/{cid}")
    cache.parent.mkdir(parents=True)
    cache.write_text("{}")
    code, _ = guard.exec_cni(Path("/opt/cni/bin"), "DEL", conf.read_bytes(), cid=cid,
                             prefix=("/usr/sbin/chroot", str(node.root)))
    assert code == 0
    decisions = {r["containerID"]: r["decision"]
                 for r in guard_log(node.path("/var/log/cni-delguard/delguard.log"),
                                    command="DEL")}
    assert decisions[cid] != "skip", decisions
