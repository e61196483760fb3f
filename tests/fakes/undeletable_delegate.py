"""FAKE DELEGATE, for tests only: a CNI plugin whose ADD succeeds and whose DEL always fails.

It stands for a delegate that can never delete an attachment whose ADD completed: multus v4.3.0
rebuilding a kube-ovn conflist without `server_socket` on every DEL (kube-ovn then answers
"server_socket is required in cni.conf", code 7, for state it does hold), or a network daemon that
is gone for good (`hangDel`: its DEL never answers, and the guard's timeout ends it). Debian's
reference plugins delete what they added, so none of them shows this on demand.

Knobs, in its own plugin config:

    recordFile   JSON lines {"command", "containerID", "ifname", "pid"} appended on every call
    hangDel      DEL sleeps for an hour instead of failing at once

Install it with tests.support.fakes.install_fake(bin_dir, "undeletable",
"undeletable_delegate.py").
"""

from __future__ import annotations

import json
import os
import sys
import time

STALE_DEL = "server_socket is required in cni.conf"


def main() -> int:
    command = os.environ.get("CNI_COMMAND", "")
    if command == "VERSION":
        sys.stdout.write(json.dumps({"cniVersion": "1.1.0", "supportedVersions": ["1.0.0"]}))
        return 0
    conf = json.loads(sys.stdin.read())
    path = conf.get("recordFile")
    if isinstance(path, str):
        entry = {
            "command": command,
            "containerID": os.environ.get("CNI_CONTAINERID", ""),
            "ifname": os.environ.get("CNI_IFNAME", ""),
            "pid": os.getpid(),
        }
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
    version = str(conf.get("cniVersion", "1.0.0"))
    if command == "ADD":
        sys.stdout.write(json.dumps({"cniVersion": version, "interfaces": [], "ips": []}))
        return 0
    if command == "DEL":
        if conf.get("hangDel"):
            time.sleep(3600)
        sys.stdout.write(json.dumps({"cniVersion": version, "code": 7, "msg": STALE_DEL}))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
