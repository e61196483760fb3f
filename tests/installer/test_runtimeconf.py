"""runtimeconf.py: the CNI dirs the runtime's own config names (containerd schemas 1 to 3 with
imports, CRI-O with drop-ins, MicroK8s' template with ${SNAP_DATA}), and the fallback to the
layout table (layouts.runtime_dirs)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from cni_delguard.host import layouts, runtimeconf
from cni_delguard.host.runtimeconf import ConfigError, containerd_dirs, crio_dirs

DEFAULTS = ("/etc/cni/net.d", "/opt/cni/bin")


def docs(*texts: str) -> list[tuple[str, dict]]:
    return [(f"/f{i}.toml", tomllib.loads(t)) for i, t in enumerate(texts)]


@pytest.mark.parametrize(
    ("texts", "want"),
    [
        pytest.param(["version = 2"], DEFAULTS, id="no-cri-plugin-defaults"),
        pytest.param(['version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\n'
                      'bin_dir = "/var/lib/rancher/k3s/data/abc/bin"\n'
                      'conf_dir = "/var/lib/rancher/k3s/agent/etc/cni/net.d"\n'],
                     ("/var/lib/rancher/k3s/agent/etc/cni/net.d",
                      "/var/lib/rancher/k3s/data/abc/bin"), id="v2-k3s"),
        pytest.param(['[plugins.cri.cni]\nbin_dir = "/x/bin"\nconf_dir = "/x/net.d"\n'],
                     ("/x/net.d", "/x/bin"), id="v1"),
        pytest.param(['version = 3\n[plugins."io.containerd.cri.v1.runtime".cni]\n'
                      'bin_dirs = ["/a/bin", "/b/bin"]\nconf_dir = "/a/net.d"\n'],
                     ("/a/net.d", "/a/bin"), id="v3-bin-dirs-first"),
        pytest.param(['version = 3\n[plugins."io.containerd.cri.v1.runtime".cni]\n'
                      'bin_dir = "/c/bin/"\n'], ("/etc/cni/net.d", "/c/bin"), id="v3-bin-dir"),
        pytest.param(['version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\n'
                      'bin_dir = "/a/bin"\n',
                      'version = 2\n[plugins."io.containerd.grpc.v1.cri".registry]\n'
                      'config_path = "/etc/containerd/certs.d"\n'],
                     DEFAULTS, id="a-drop-in-replaces-the-whole-plugin-table"),
        pytest.param(['version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\n'
                      'bin_dir = "/a/bin"\n', 'version = 2\n[debug]\nlevel = "info"\n'],
                     ("/etc/cni/net.d", "/a/bin"), id="a-drop-in-without-the-plugin-keeps-it"),
    ],
)
def test_containerd_dirs(texts, want):
    assert containerd_dirs(docs(*texts)) == want


@pytest.mark.parametrize(
    "text",
    [
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\nbin_dir = "relative/bin"\n',
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\nbin_dir = "${SNAP}/bin"\n',
        'version = 2\nplugins = 3\n',
    ],
)
def test_containerd_paths_that_are_not_absolute_paths_are_refused(text):
    with pytest.raises(ConfigError):
        containerd_dirs(docs(text))


def test_crio_dirs_a_later_drop_in_key_wins():
    files = docs('[crio.network]\nnetwork_dir = "/etc/kubernetes/cni/net.d/"\n'
                 'plugin_dirs = ["/var/lib/cni/bin", "/usr/libexec/cni"]\n',
                 '[crio.network]\nplugin_dirs = ["/opt/other/bin"]\n')
    assert crio_dirs(files) == ("/etc/kubernetes/cni/net.d", "/opt/other/bin")
    assert crio_dirs(docs("[crio]\n")) == DEFAULTS


def write(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def test_find_reads_containerds_imports_in_order_under_the_root(tmp_path):
    write(tmp_path, "/etc/containerd/config.toml",
          'version = 2\nimports = ["conf.d/*.toml"]\n'
          '[plugins."io.containerd.grpc.v1.cri".cni]\nbin_dir = "/main/bin"\n')
    write(tmp_path, "/etc/containerd/conf.d/10-cni.toml",
          'version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\nbin_dir = "/ten/bin"\n'
          'conf_dir = "/ten/net.d"\n')
    write(tmp_path, "/etc/containerd/conf.d/20-cni.toml",
          'version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\nbin_dir = "/twenty/bin"\n')
    found = runtimeconf.find(str(tmp_path), "standard")
    assert found is not None
    assert (found.conf_dir, found.bin_dir) == ("/etc/cni/net.d", "/twenty/bin")
    assert found.source == "containerd /etc/containerd/config.toml + 2 import(s)"


def test_find_resolves_microk8s_snap_data_to_the_revision(tmp_path):
    write(tmp_path, "/var/snap/microk8s/7229/args/containerd-template.toml",
          'version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\n'
          'bin_dir = "${SNAP_DATA}/opt/cni/bin"\nconf_dir = "${SNAP_DATA}/args/cni-network"\n')
    (tmp_path / "var/snap/microk8s/current").symlink_to("7229")
    found = runtimeconf.find(str(tmp_path), "microk8s")
    assert found is not None
    assert (found.conf_dir, found.bin_dir) == ("/var/snap/microk8s/7229/args/cni-network",
                                               "/var/snap/microk8s/7229/opt/cni/bin")


def test_find_reads_crio_and_its_drop_ins(tmp_path):
    write(tmp_path, "/etc/crio/crio.conf",
          '[crio.network]\nnetwork_dir = "/etc/kubernetes/cni/net.d"\n')
    write(tmp_path, "/etc/crio/crio.conf.d/01-bins.conf",
          '[crio.network]\nplugin_dirs = ["/var/lib/cni/bin"]\n')
    found = runtimeconf.find(str(tmp_path), "openshift")
    assert found is not None
    assert (found.conf_dir, found.bin_dir) == ("/etc/kubernetes/cni/net.d", "/var/lib/cni/bin")


def test_k3s_without_flannel_writes_no_cni_section_so_containerds_defaults_apply(tmp_path):
    """k3s --flannel-backend=none: its template leaves the cni table out."""
    write(tmp_path, "/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
          'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
          'snapshotter = "overlayfs"\n')
    conf_dir, bin_dir, source = layouts.runtime_dirs(layouts.BY_NAME["k3s"], str(tmp_path))
    assert (conf_dir, bin_dir) == DEFAULTS
    assert source.startswith("containerd /var/lib/rancher/k3s/agent/etc/containerd/config.toml")


def test_runtime_dirs_fall_back_to_the_table_and_flags_win(tmp_path):
    k3s = layouts.BY_NAME["k3s"]
    conf_dir, _, source = layouts.runtime_dirs(k3s, str(tmp_path))
    assert (conf_dir, source) == (k3s.conf_dir, layouts.TABLE)
    write(tmp_path, "/var/lib/rancher/k3s/agent/etc/containerd/config.toml", "version = [")
    conf_dir, _, source = layouts.runtime_dirs(k3s, str(tmp_path))
    assert conf_dir == k3s.conf_dir and source.startswith(layouts.TABLE + " (the runtime's")
    assert layouts.runtime_dirs(k3s, str(tmp_path), "/c", "/b") == ("/c", "/b", "flags")


@pytest.mark.parametrize(
    ("texts", "want"),
    [
        pytest.param(["write-kubeconfig-mode: 644\n"], None, id="not-set"),
        pytest.param(["data-dir: /srv/k3s\n"], "/srv/k3s", id="plain"),
        pytest.param(['data-dir: "/srv/k3s" # moved\n'], "/srv/k3s", id="quoted-comment"),
        pytest.param(["data-dir: /a\n", "data-dir: '/b'\n"], "/b", id="a-later-file-wins"),
        pytest.param(["  data-dir: /nested\n"], None, id="not-top-level"),
    ],
)
def test_k3s_data_dir(texts, want):
    assert runtimeconf.k3s_data_dir(texts) == want


def test_k3s_with_a_custom_data_dir_reads_the_containerd_config_there(tmp_path):
    write(tmp_path, "/etc/rancher/k3s/config.yaml", "token: x\n")
    write(tmp_path, "/etc/rancher/k3s/config.yaml.d/50-data.yaml", "data-dir: /srv/k3s\n")
    write(tmp_path, "/srv/k3s/agent/etc/containerd/config.toml",
          'version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\n'
          'bin_dir = "/srv/k3s/data/cni"\nconf_dir = "/srv/k3s/agent/etc/cni/net.d"\n')
    found = runtimeconf.find(str(tmp_path), "k3s")
    assert found is not None
    assert (found.conf_dir, found.bin_dir) == ("/srv/k3s/agent/etc/cni/net.d", "/srv/k3s/data/cni")
    assert found.source == "containerd /srv/k3s/agent/etc/containerd/config.toml"
