"""cni_delguard/ops/assess/chains.py: how multus is given its network, and which kind of chain
(and so which measured chains) a node's conf is."""

from __future__ import annotations

import pytest

from cni_delguard.ops.assess import chains
from delguard_build import chains as measured
from delguard_build import matrix

KUBE_OVN = {"cniVersion": "0.3.1", "name": "kube-ovn",
            "plugins": [{"type": "kube-ovn", "server_socket": "/run/openvswitch/kube-ovn.sock"}]}


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        pytest.param({"delegates": [KUBE_OVN]}, (chains.INLINE, None), id="inline"),
        pytest.param({"clusterNetwork": "/etc/cni/net.d/10-kube-ovn.conflist"},
                     (chains.PATH, "/etc/cni/net.d/10-kube-ovn.conflist"), id="path"),
        pytest.param({"clusterNetwork": "net.d/x.conflist"}, (chains.PATH, "net.d/x.conflist"),
                     id="a-slash-is-a-path"),
        pytest.param({"clusterNetwork": "kube-ovn"}, (chains.NAME, "kube-ovn"), id="name"),
        pytest.param({"clusterNetwork": "kube-ovn", "delegates": [KUBE_OVN]},
                     (chains.NAME, "kube-ovn"), id="clusterNetwork-wins"),
        pytest.param({"delegates": []}, (None, None), id="empty-delegates"),
        pytest.param({"clusterNetwork": ""}, (None, None), id="empty-clusterNetwork"),
        pytest.param({}, (None, None), id="neither"),
    ],
)
def test_form_of(conf: dict[str, object], expected: tuple[str | None, str | None]) -> None:
    assert chains.form_of(conf) == expected


@pytest.mark.parametrize(
    ("behind", "kind"),
    [
        pytest.param(chains.Behind("multus", chains.INLINE), "multus-thin-inline", id="thin"),
        pytest.param(chains.Behind("multus", chains.PATH), "multus-thin-path", id="thin-path"),
        pytest.param(chains.Behind("multus", chains.NAME), "multus-thin-name", id="thin-name"),
        pytest.param(chains.Behind("multus"), "multus-thin-other", id="thin-neither"),
        pytest.param(chains.Behind("multus-shim", chains.PATH, config_file="auto"),
                     "multus-thick-path", id="thick-auto"),
        pytest.param(chains.Behind("multus-shim", chains.NAME), "multus-thick-other",
                     id="thick-name"),
        pytest.param(chains.Behind("multus-shim", chains.INLINE), "multus-thick-other",
                     id="thick-inline"),
        pytest.param(chains.Behind("kube-ovn"), "plain", id="kube-ovn-alone"),
        pytest.param(chains.Behind("bridge", plugins=("bridge", "portmap")), "plain",
                     id="bridge"),
    ],
)
def test_classify(behind: chains.Behind, kind: str) -> None:
    found = chains.classify(behind)
    assert found is not None and found.name == kind


def test_no_plugin_is_no_kind() -> None:
    assert chains.classify(chains.Behind(None)) is None


def test_every_kind_names_only_measured_chains_and_each_measured_chain_is_a_matrix_one() -> None:
    assert set(measured.CHAINS) == set(matrix.CHAINS)
    for kind in chains.KINDS:
        assert set(kind.chains) <= set(measured.CHAINS), kind.name
    # every chain the matrix runs stands for some kind a node can be
    assert {d for k in chains.KINDS for d in k.chains} == set(matrix.CHAINS)
