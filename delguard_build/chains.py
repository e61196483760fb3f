"""The chains the matrix ran: what sat behind the guard in a run, one row each (pure).

A chain's name is a CHAINS entry of matrix.py; here is what it stands for on a node (a page's
column label, its description in docs/compatibility.md, the multus version it ran) and whether
it is a stand-in for a behaviour rather than a real plugin. Which kind of chain on a node each
one measured is the product's part (cni_delguard/ops/assess/chains.py: Kind.chains), since
`assess` classifies the node's conf at run time; verdicts.py ships each chain's row from here
with its verdicts. Adding a chain is one row here and one name in matrix.CHAINS.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chain:
    """A chain the matrix ran and what it stands for."""

    name: str  # a matrix.CHAINS name
    label: str  # as a table's column says it
    description: str  # as docs/compatibility.md's per-chain tables introduce it
    multus: str | None  # the multus version it ran, or None (no multus)
    stand_in: bool = False  # a fake standing for a behaviour, not a real plugin
    # A column of docs/compatibility.md's verdicts only when the matrix has its rows (the others
    # always are, saying "not measured" where they have none).
    optional: bool = False


CHAINS: dict[str, Chain] = {c.name: c for c in (
    Chain("multus-thin", "multus thin, delegate inline",
          "real multus thin, kube-ovn's conflist inline in `delegates`", "v4.3.0"),
    Chain("multus-thin-path", "multus thin, delegate by path (`clusterNetwork`)",
          "real multus thin, kube-ovn's conflist by its path in `clusterNetwork`", "v4.3.0"),
    Chain("multus-thick", "multus thick",
          "real multus-shim and multus-daemon, `multusConfigFile: auto`", "v4.3.0"),
    Chain("cozystack-multus-v4.2.3",
          "Cozystack v1.2.0: multus v4.2.3 thick, auto mode, before kube-ovn and cilium-cni",
          "Cozystack v1.2.0's conf dir: real multus v4.2.3 thick, auto mode, before "
          "`05-cilium.conflist`", "v4.2.3",
          optional=True),
    Chain("cozystack-multus-v4.3.0",
          "Cozystack v1.2.0 with multus v4.3.0 thick, before kube-ovn and cilium-cni",
          "the same with real multus v4.3.0", "v4.3.0",
          optional=True),
    Chain("fake-stateful", "a delegate that fails DEL once it holds no state",
          "a delegate that fails DEL once it holds no state", None, stand_in=True),
)}
