"""host/layouts.py: the layout table and `auto` on a node root (the node's own links followed
inside it: NodeRoot.located, tested in test_host_root.py). Node roots here are plain temp dirs
with the files a distribution leaves (no plugin runs); tests/node_roots runs the installer on
them."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

import pytest

from cni_delguard.guard import defaults
from cni_delguard.host import layouts
from cni_delguard.host.layouts import BY_NAME, LAYOUTS, Layout, NoLayoutError, choose
from cni_delguard.host.root import NodeRoot
from cni_delguard.tooling import UsageError

CONF = '{"cniVersion": "1.0.0", "name": "n", "type": "bridge"}\n'


def plant(root: Path, path: str, content: str | None = None) -> Path:
    """A file (content given) or a directory at `path` (as the node names it) under root."""
    target = root / path.lstrip("/")
    if content is None:
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return target


def conf_in(root: Path, layout: Layout, name: str = "10-net.conflist") -> Path:
    return plant(root, f"{layout.conf_dir}/{name}", CONF)


def test_every_name_is_a_row_once_and_standard_comes_first():
    assert LAYOUTS[0].name == "standard"
    assert len(BY_NAME) == len(LAYOUTS)
    assert layouts.CHOICES == ("auto", "standard", "k3s", "rke2", "microk8s", "openshift", "talos")


def test_rows_that_share_a_conf_dir_are_told_apart_by_a_sign():
    """Of the rows with one conf dir, at most one may go without a sign, or auto could not tell
    them apart: it would have to guess."""
    by_dir: dict[str, list[Layout]] = {}
    for layout in LAYOUTS:
        by_dir.setdefault(layout.conf_dir, []).append(layout)
    for group in by_dir.values():
        assert sum(layout.sign is None for layout in group) <= 1, group


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: layout.name)
def test_every_path_a_row_gives_is_one_the_daemonset_mounts(layout):
    """conf dir, the newest bin dir candidate, the state dir and the log's dir are each under
    one of the row's writable mounts (what its overlay's hostPaths must be: test_manifests.py).
    An older candidate is not: k3s's data/current/bin (before October 2024) sits beside the
    release's other binaries, which the DaemonSet no longer mounts (docs/install.md)."""
    mounts = list(layout.mounts().values())
    paths = [layout.conf_dir, layout.bin_dirs[0], layout.state_dir,
             os.path.dirname(layout.log_file)]
    for path in paths:
        assert any(path == m or path.startswith(m + "/") for m in mounts), (path, mounts)
    for older in layout.bin_dirs[1:]:
        assert not any(older == m or older.startswith(m + "/") for m in mounts), (older, mounts)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: layout.name)
def test_a_root_with_one_layouts_conf_is_that_layout(tmp_path, layout):
    conf_in(tmp_path, layout)
    if layout.sign:
        plant(tmp_path, layout.sign, "")
    assert choose(str(tmp_path), "auto") == layout


def test_a_shared_conf_dir_without_a_sign_is_the_standard_layout(tmp_path):
    conf_in(tmp_path, BY_NAME["standard"])
    assert choose(str(tmp_path), "auto").name == "standard"
    plant(tmp_path, "/var/lib/rancher/rke2")
    assert choose(str(tmp_path), "auto").name == "rke2"


def test_two_layouts_confs_are_refused_and_named(tmp_path):
    conf_in(tmp_path, BY_NAME["standard"])
    conf_in(tmp_path, BY_NAME["k3s"])
    with pytest.raises(UsageError) as caught:
        choose(str(tmp_path), "auto")
    message = str(caught.value)
    assert "standard: " in message and "k3s: " in message and "\n" not in message
    assert "pass --layout standard|k3s" in message


def microk8s_with_links(root: Path) -> None:
    """MicroK8s 1.29 and later: /etc/cni/net.d and /opt/cni/bin are links into the snap's
    current revision (absolute links, as the snap makes them)."""
    plant(root, "/var/snap/microk8s/7229/args/cni-network/10-net.conflist", CONF)
    plant(root, "/var/snap/microk8s/7229/opt/cni/bin")
    (root / "var/snap/microk8s/current").symlink_to("7229")
    plant(root, "/etc/cni")
    plant(root, "/opt/cni")
    (root / "etc/cni/net.d").symlink_to("/var/snap/microk8s/current/args/cni-network")
    (root / "opt/cni/bin").symlink_to("/var/snap/microk8s/current/opt/cni/bin")


def test_layouts_that_resolve_to_the_same_dirs_are_one_node_the_one_not_linked(tmp_path):
    microk8s_with_links(tmp_path)
    assert choose(str(tmp_path), "auto").name == "microk8s"


def test_the_same_links_with_another_layouts_conf_are_still_an_ambiguity(tmp_path):
    microk8s_with_links(tmp_path)
    conf_in(tmp_path, BY_NAME["k3s"])
    with pytest.raises(UsageError, match="more than one layout"):
        choose(str(tmp_path), "auto")


def test_explicit_layout_and_flags_need_no_guess(tmp_path):
    conf_in(tmp_path, BY_NAME["standard"])
    conf_in(tmp_path, BY_NAME["k3s"])
    assert choose(str(tmp_path), "k3s").name == "k3s"
    args = argparse.Namespace(root=str(tmp_path), layout="auto", conf_dir="/etc/cni/net.d",
                              bin_dir="/opt/cni/bin", state_dir=None, log_file=None)
    # Every field that differs between the two is given by a flag: nothing left to guess.
    assert layouts.of(args, layouts.FIELDS).name in ("standard", "k3s")
    args.bin_dir = None
    with pytest.raises(UsageError, match="more than one layout"):
        layouts.of(args, layouts.FIELDS)


def test_layouts_found_that_agree_on_what_is_needed_are_no_ambiguity(tmp_path):
    """`list` needs only the state dir, which every layout keeps in one place."""
    conf_in(tmp_path, BY_NAME["standard"])
    conf_in(tmp_path, BY_NAME["openshift"])
    assert choose(str(tmp_path), "auto", needs=("state_dir",)).state_dir == defaults.STATE_DIR
    with pytest.raises(UsageError):
        choose(str(tmp_path), "auto", needs=("state_dir", "conf_dir"))


def test_a_made_up_row_that_keeps_its_state_elsewhere_is_an_ambiguity_for_list(tmp_path):
    """No layout found so far keeps state, log or caches elsewhere; a row that did would make
    `list` on a root holding both layouts' confs a guess, and is refused."""
    odd = Layout("odd", "/etc/odd/net.d", ("/opt/odd/bin",), state_dir="/var/lib/odd/delguard")
    table = (*LAYOUTS, odd)
    conf_in(tmp_path, BY_NAME["standard"])
    conf_in(tmp_path, odd)
    with pytest.raises(UsageError, match="odd"):
        choose(str(tmp_path), "auto", needs=("state_dir",), table=table)


def test_no_conf_anywhere_is_no_layout_for_the_installer_and_standard_for_list(tmp_path):
    with pytest.raises(NoLayoutError) as caught:
        choose(str(tmp_path), "auto")
    assert f"no .conf/.conflist/.json file in {tmp_path}/etc/cni/net.d, " in str(caught.value)
    assert choose(str(tmp_path), "auto", needs=("state_dir",)).name == "standard"


def test_with_no_conf_the_guard_in_a_bin_dir_says_where_it_was_installed(tmp_path):
    """A conf removed (a network plugin uninstalled) leaves the guard in its bin dir: uninstall,
    ready and doctor still find the layout."""
    k3s = BY_NAME["k3s"]
    plant(tmp_path, k3s.bin_dirs[0] + "/cni-delguard", "")
    assert choose(str(tmp_path), "auto").name == "k3s"


def test_k3s_bin_dir_is_data_cni_when_there_else_the_running_releases(tmp_path):
    k3s = BY_NAME["k3s"]
    release = plant(tmp_path, "/var/lib/rancher/k3s/data/0123abcd/bin")
    # k3s links data/current to the running release by its absolute host path
    (tmp_path / "var/lib/rancher/k3s/data/current").symlink_to("/var/lib/rancher/k3s/data/0123abcd")
    assert layouts.bin_dir(k3s, str(tmp_path)) == "/var/lib/rancher/k3s/data/current/bin"
    assert NodeRoot(str(tmp_path)).located(layouts.bin_dir(k3s, str(tmp_path))) == str(release)
    plant(tmp_path, "/var/lib/rancher/k3s/data/cni")  # a release from October 2024 on
    assert layouts.bin_dir(k3s, str(tmp_path)) == "/var/lib/rancher/k3s/data/cni"


def test_guard_keys_are_only_what_differs_from_the_guards_defaults():
    assert all(layouts.guard_keys(layout) == {} for layout in LAYOUTS)
    odd = dataclasses.replace(
        BY_NAME["k3s"], result_cache_dirs=("/var/lib/odd/results",), log_file="/var/log/odd.log"
    )
    assert layouts.guard_keys(odd) == {
        "resultCacheDirs": ["/var/lib/odd/results"],
        "logFile": "/var/log/odd.log",
    }


def test_an_unknown_name_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="not one of auto, standard"):
        choose(str(tmp_path), "kind")


def readme_layout_rows() -> dict[str, list[str]]:
    """docs/install.md "Node layouts": the first cell's layout name -> the row's cells."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "install.md").read_text()
    section = text.split("## Node layouts", 1)[1].split("\n\n")
    table = next(block for block in section if block.startswith("| layout |"))
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        rows[cells[0].split("`")[1]] = cells
    return rows


def test_the_readme_table_is_the_layout_table():
    rows = readme_layout_rows()
    assert list(rows) == [layout.name for layout in LAYOUTS]
    for layout in LAYOUTS:
        _name, conf, bins, _source, overlay = rows[layout.name]
        assert conf == f"`{layout.conf_dir}`"
        assert [b for b in bins.split("`")[1::2] if b.startswith("/")] == list(layout.bin_dirs)
        assert overlay.startswith(f"`{layout.name}`")
