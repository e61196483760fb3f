"""The runtimes the kubelet suite drives: rows of the CRI suite's runtime table
(tests/e2e_cri/runtimes.py), which says where each runtime's binaries are, the config it is
started with and how it reports its version. This module only picks the rows and says where the
CNI dirs are inside a kubelet's node.

The rows: Debian's containerd 1.6.20 (the last 1.x line a kubelet of this release runs on) and
containerd 2.1.6, the seed report's. The kubelet 1.35 needs a CRI v1 runtime with cgroup v1
allowed; CRI-O is left to the CRI suite (its conmon and storage add nothing a kubelet changes).

Inside the node's mount namespace the CNI dirs are where a kubeadm node has them (/etc/cni/net.d,
/opt/cni/bin; node.py binds the node's own dirs there), so that the installer's DaemonSet finds
the node's layout as it would on a real one.
"""

from __future__ import annotations

from tests.e2e_cri.runtimes import BY_KEY, Runtime

CNI_CONF = "/etc/cni/net.d"  # inside the node's mount namespace
CNI_BIN = "/opt/cni/bin"

RUNTIMES: tuple[Runtime, ...] = (BY_KEY["containerd-1.6"], BY_KEY["containerd-2.1"])
