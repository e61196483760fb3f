"""tests/support/kubeapi.py's fake API server, listening on the loopback of a node's own network
namespace, as a real node's hostNetwork pods reach their API server from the node's network.

multus-daemon runs with hostNetwork (Cozystack's multus-daemonset-thick.yml), so the delegates it
execs run in the node's network namespace: cilium-cni's generic-veth chaining looks up the host
end of the pod's veth there (cilium v1.19.1 plugins/cilium-cni/chaining/generic-veth/
generic-veth.go), and fails ADD ("unable to lookup link") from any other. The daemon also needs the
API, so the API's socket is made in that namespace: setns(2) switches the network namespace of
the calling thread only, so a thread of its own makes the socket there and ends; the test's other
threads stay in the machine's namespace, and the store is the same object either way (the tests
put pods into it directly). A socket keeps the namespace it was made in: after a power-off the
node's namespace is a new one, and `move` makes the socket again there.
"""

from __future__ import annotations

import ctypes
import os
import threading

from tests.support.kubeapi import KubeAPI

CLONE_NEWNET = 0x40000000  # linux/sched.h


def _setns(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


class NodeKubeAPI(KubeAPI):
    """The fake API server whose listening socket is in the network namespace at `netns`."""

    netns: str = ""

    def start_in(self, netns: str) -> None:
        self.netns = netns
        failed: list[Exception] = []

        def there() -> None:
            try:
                _setns(netns)
                self.start()
            except Exception as exc:  # noqa: BLE001 - raised again in the caller's thread
                failed.append(exc)

        thread = threading.Thread(target=there, name="dgmu-kubeapi-setns")
        thread.start()
        thread.join()
        if failed:
            raise failed[0]

    def move(self, netns: str) -> None:
        """Listen in `netns` instead (the node booted with a new one); the store is kept."""
        self.close()
        self.start_in(netns)
