"""FAKE DELEGATE, for tests only: tests/fakes/stale_delegate.py, its ADD done only after minutes.

It stands for kube-ovn's legitimately slow ADD. kube-ovn v1.15.3's daemon, answering the CNI
plugin's ADD, waits for the controller's IP annotations on the pod (up to 20 tries a second
apart, pkg/daemon/handler.go handleAdd), then for `ovn-installed` on the OVS interface (up to
30 s, pkg/daemon/ovs_linux.go), and with a gateway check on the subnet pings the gateway for up
to 200 s (pkg/daemon/ovs.go, gatewayCheckMaxRetry). The kubelet gives RunPodSandbox 240 s, so an
ADD that takes 150, 200 or 230 s starts its pod; a wrapper with a shorter timeout of its own
would fail it. Only the timing is kube-ovn's: after the wait the call is stale_delegate.py's
(so the chain is the kubelet suite's "fake-stateful"), and no interface is made (the chain's
bridge plugin after it makes eth0).

Knobs, in its plugin config beside stale_delegate.py's own:

    addSeconds       {"<pod name prefix>": seconds}: the ADD of a pod whose name (K8S_POD_NAME
                     in CNI_ARGS) is "<prefix>-..." waits that long first (0 otherwise)
    slowRecordFile   JSON-lines log: one line when an ADD starts and one when its wait ends,
                     with the container ID, pod name and time (so a test sees an ADD cut short)

Install it with tests.support.fakes.install_slow(); it is run as a plugin (CNI_COMMAND in env).
"""

from __future__ import annotations

import io
import json
import os
import sys
import time

from tests.fakes import stale_delegate


def _pod() -> str:
    for pair in os.environ.get("CNI_ARGS", "").split(";"):
        key, _, value = pair.partition("=")
        if key == "K8S_POD_NAME":
            return value
    return ""


def _record(conf: dict[str, object], phase: str) -> None:
    path = conf.get("slowRecordFile")
    if not isinstance(path, str):
        return
    entry = {"command": "ADD", "phase": phase, "pod": _pod(), "pid": os.getpid(),
             "containerID": os.environ.get("CNI_CONTAINERID", ""), "time": time.time()}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def _delay(conf: dict[str, object]) -> float:
    table = conf.get("addSeconds")
    pod = _pod()
    if isinstance(table, dict):
        for prefix, seconds in table.items():
            if pod.startswith(f"{prefix}-"):
                return float(seconds)
    return 0.0


def main() -> int:
    if os.environ.get("CNI_COMMAND") == "ADD":
        raw = sys.stdin.read()
        conf = json.loads(raw)
        _record(conf, "start")
        time.sleep(_delay(conf))
        _record(conf, "end")
        sys.stdin = io.StringIO(raw)
    return stale_delegate.main()
