"""host/dirs.py: the one resolution of layout + the runtime's config + flags into the node's
dirs, on plain temp node roots."""

from __future__ import annotations

import pytest

from cni_delguard.host import dirs, layouts
from cni_delguard.host.root import NodeRoot
from cni_delguard.tooling import UsageError

CONF = '{"cniVersion": "1.0.0", "name": "n", "type": "bridge"}\n'


def plant(root, path, text=None):
    where = root / path.lstrip("/")
    if text is None:
        where.mkdir(parents=True, exist_ok=True)
    else:
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(text)
    return where


@pytest.fixture
def standard(tmp_path):
    plant(tmp_path, "/etc/cni/net.d/10-bridge.conf", CONF)
    plant(tmp_path, "/opt/cni/bin")
    return tmp_path


def test_the_layouts_dirs_when_nothing_else_says(standard):
    d = dirs.find(str(standard))
    assert (d.layout.name, d.conf_dir, d.bin_dir, d.source) == (
        "standard", "/etc/cni/net.d", "/opt/cni/bin", layouts.TABLE)
    assert (d.conf_here, d.bin_here) == (str(standard / "etc/cni/net.d"),
                                         str(standard / "opt/cni/bin"))
    assert (d.state_dir, d.log_file) == (layouts.STANDARD.state_dir, layouts.STANDARD.log_file)
    assert d.state_here == str(standard) + layouts.STANDARD.state_dir


def test_the_runtimes_config_wins_over_the_table(standard):
    plant(standard, "/etc/containerd/config.toml",
          'version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\nconf_dir = "/etc/x/net.d"\n')
    d = dirs.find(str(standard))
    assert (d.conf_dir, d.bin_dir) == ("/etc/x/net.d", "/opt/cni/bin")
    assert d.source == "containerd /etc/containerd/config.toml"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        pytest.param({"conf_dir": "/srv/../etc/n"}, ("/etc/n", "/opt/cni/bin"), id="conf-dir"),
        pytest.param({"bin_dir": "/srv/bin"}, ("/etc/cni/net.d", "/srv/bin"), id="bin-dir"),
        pytest.param({"conf_dir": "/a", "bin_dir": "/b"}, ("/a", "/b"), id="both"),
    ],
)
def test_a_flag_wins_normalised(standard, flags, expected):
    d = dirs.find(str(standard), **flags)
    assert (d.conf_dir, d.bin_dir) == expected


def test_the_guards_paths_from_flags_or_the_layout(standard):
    d = dirs.find(str(standard), state_dir="/../srv/dg", log_file="")
    assert (d.state_dir, d.log_file, d.log_here) == ("/srv/dg", "", "")
    assert d.state_here == str(standard / "srv/dg")


def test_a_relative_flag_is_a_usage_error(standard):
    with pytest.raises(UsageError, match="must be an absolute path"):
        dirs.find(str(standard), conf_dir="etc/cni")


def test_no_layout_found(tmp_path):
    with pytest.raises(layouts.NoLayoutError):
        dirs.find(str(tmp_path))
    assert dirs.find(str(tmp_path), standard_when_none=True).layout is layouts.STANDARD


def test_a_layout_known_is_resolved_again_never_chosen_again(tmp_path):
    """A watcher's poll: the k3s row's dirs follow data/current as it moves."""
    k3s = layouts.BY_NAME["k3s"]
    plant(tmp_path, "/var/lib/rancher/k3s/data/aaa/bin")
    plant(tmp_path, "/var/lib/rancher/k3s/data/bbb/bin")
    current = tmp_path / "var/lib/rancher/k3s/data/current"
    current.symlink_to("/var/lib/rancher/k3s/data/aaa")
    root = NodeRoot(str(tmp_path))
    assert dirs.of_layout(root, k3s).bin_here.endswith("/data/aaa/bin")
    current.unlink()
    current.symlink_to("/var/lib/rancher/k3s/data/bbb")
    assert dirs.of_layout(root, k3s).bin_here.endswith("/data/bbb/bin")
