"""FAKE DELEGATE, for tests only: a CNI plugin that behaves like kube-ovn's (cmd/cni) towards its
caller, without OVS, OVN or a daemon behind it.

It stands for kube-ovn behind multus, which no installable part here can be: the real plugin needs
its kube-ovn-cni daemon, OVS and an OVN database. What it copies from kube-ovn, and nothing more:

- Its config loading (kube-ovn's loadNetConf): `server_socket` is read from the plugin's own
  config, or from its `ipam` when the type is not "kube-ovn"; when it is missing every command
  fails before anything else with code 7, msg "Invalid Configuration", details "server_socket is
  required in cni.conf, ..." (the error of the seed report). Then K8S_POD_NAME and
  K8S_POD_NAMESPACE are required in CNI_ARGS (code 7, "<key> is required in CNI_ARGS").
- Its daemon: every ADD and DEL is an RPC to the kube-ovn-cni daemon at `server_socket`; when
  nothing is there the RPC fails with code 11 "RPC failed" (kube-ovn's ErrTryAgainLater). Here
  the daemon is "up" while the path exists (the chain makes it).
- Its DEL is idempotent once the config is complete and the daemon answers: the daemon answers
  204 when the pod is gone and deletes the port with --if-exists otherwise (pkg/daemon/handler.go
  handleDel). So this fake fails a DEL only for the reasons above or for an injected failure,
  never merely because it holds no state for the attachment (tests/fakes/stale_delegate.py is the
  delegate that does that).

It keeps one state file per attachment (<stateDir>/<containerID>:<ifname>, written by ADD,
removed by a DEL that succeeds), standing for the OVS port and IP the real one would leave behind
when its DEL never arrives. It appends a `start` line before it acts and an `end` line (rc,
stdout) after, to a JSON-lines record, so tests see every call and the exact config it got.

Its own settings are NOT in its CNI config: multus rewrites delegate configs (it drops unknown
keys on some paths, which is the point of some tests), so knobs placed there could vanish with
the keys under test. They live in a JSON file whose path is baked into the installed launcher
(tests/support/fakes.install_kube_ovn); the file is read on every call, so a test can change the
behaviour between calls:

    stateDir     where its state files live (required)
    recordFile   JSON-lines record of invocations (required)
    failAdd      CNI error code its ADD returns (after writing nothing)
    failDel      CNI error code its DEL returns even when config and daemon are fine
    hang         commands that sleep instead of answering, e.g. ["ADD"]: the plugin's client has
                 no timeout, so it waits as long as its daemon does (an ADD up to 20 + 30 +
                 200 s, an ovs-vsctl call 30 s: tests/fakes/kube_ovn_daemon.py cites each); a
                 longer sleep stands for a daemon process that no longer answers at all
    hangSeconds  how long they sleep (default 3600)
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from typing import Any

from tests.support.records import append_jsonl

SUPPORTED = ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]  # kube-ovn: version.All


class CNIError(Exception):
    def __init__(self, code: int, msg: str, details: str = "") -> None:
        super().__init__(msg)
        self.code, self.msg, self.details = code, msg, details



def load_conf(raw: str) -> dict[str, Any]:
    """kube-ovn's loadNetConf: the config, with `server_socket` resolved, or code 6 / 7."""
    try:
        conf = json.loads(raw)
    except ValueError as exc:
        raise CNIError(6, "failed to load netconf", str(exc)) from exc
    if not isinstance(conf, dict):
        raise CNIError(6, "failed to load netconf", "not a JSON object")
    socket = conf.get("server_socket") or ""
    ipam = conf.get("ipam")
    if conf.get("type") != "kube-ovn" and isinstance(ipam, dict):
        socket = ipam.get("server_socket") or ""
    if not socket:
        raise CNIError(7, "Invalid Configuration",
                       f"server_socket is required in cni.conf, {json.dumps(conf)}")
    return conf | {"server_socket": socket}


def pod_arg(key: str) -> str:
    """kube-ovn's parseValueFromArgs: a non-empty KEY=value in CNI_ARGS, or code 7."""
    args = os.environ.get("CNI_ARGS", "")
    if not args:
        raise CNIError(7, "Invalid Configuration", "CNI_ARGS is required")
    for item in args.split(";"):
        name, _, value = item.partition("=")
        if name == key and value:
            return value
    raise CNIError(7, "Invalid Configuration", f"{key} is required in CNI_ARGS")


def _daemon(conf: dict[str, Any]) -> None:
    if not os.path.exists(conf["server_socket"]):
        raise CNIError(11, "RPC failed", f"dial unix {conf['server_socket']}: connect: "
                       "no such file or directory")


def _state_path(settings: dict[str, Any]) -> str:
    state_dir = str(settings["stateDir"])
    os.makedirs(state_dir, exist_ok=True)
    return os.path.join(state_dir, f"{os.environ['CNI_CONTAINERID']}:{os.environ['CNI_IFNAME']}")


def _result(conf: dict[str, Any]) -> dict[str, Any]:
    """A result shaped like kube-ovn's: one interface in the sandbox, one address from its pod
    CIDR (derived from the container ID, so repeated ADDs agree)."""
    digest = hashlib.sha256(os.environ["CNI_CONTAINERID"].encode()).digest()
    address = f"10.244.{digest[0]}.{digest[1] % 253 + 2}/16"
    version = str(conf.get("cniVersion", "0.3.1"))
    iface = {"name": os.environ["CNI_IFNAME"], "sandbox": os.environ.get("CNI_NETNS", "")}
    ip: dict[str, Any] = {"address": address, "gateway": "10.244.0.1", "interface": 0}
    if version in ("0.3.0", "0.3.1"):
        ip["version"] = "4"
    return {"cniVersion": version, "interfaces": [iface], "ips": [ip], "dns": {}}


def _hang(settings: dict[str, Any], command: str) -> None:
    if command in (settings.get("hang") or []):
        time.sleep(float(settings.get("hangSeconds", 3600)))


def run(command: str, raw: str, settings: dict[str, Any]) -> str:
    """One invocation; returns stdout, raises CNIError."""
    if command == "VERSION":
        return json.dumps({"cniVersion": "1.1.0", "supportedVersions": SUPPORTED})
    if command not in ("ADD", "DEL"):
        return ""  # kube-ovn registers ADD and DEL only; CHECK, GC and STATUS do nothing here
    conf = load_conf(raw)
    pod_arg("K8S_POD_NAME")
    pod_arg("K8S_POD_NAMESPACE")
    _hang(settings, command)
    _daemon(conf)
    state = _state_path(settings)
    if command == "ADD":
        if settings.get("failAdd"):
            raise CNIError(int(settings["failAdd"]), "RPC failed", "fake kube-ovn: ADD refused")
        with open(state, "w", encoding="utf-8") as f:
            f.write(raw)
        return json.dumps(_result(conf))
    if settings.get("failDel"):
        raise CNIError(int(settings["failDel"]), "RPC failed", "fake kube-ovn: DEL refused")
    if os.path.exists(state):
        os.unlink(state)
    return ""


def main(settings_path: str) -> None:
    with open(settings_path, encoding="utf-8") as f:
        settings = json.load(f)
    command = os.environ.get("CNI_COMMAND", "")
    raw = "" if command == "VERSION" else sys.stdin.read()
    try:
        stdin: Any = json.loads(raw) if raw else None
    except ValueError:
        stdin = raw
    base = {"command": command, "containerID": os.environ.get("CNI_CONTAINERID", ""),
            "ifname": os.environ.get("CNI_IFNAME", ""), "netns": os.environ.get("CNI_NETNS", ""),
            "args": os.environ.get("CNI_ARGS", ""), "pid": os.getpid()}
    append_jsonl(settings["recordFile"], base | {"phase": "start", "stdin": stdin})
    version = stdin.get("cniVersion", "0.3.1") if isinstance(stdin, dict) else "0.3.1"
    try:
        out, rc = run(command, raw, settings), 0
    except CNIError as exc:
        body = {"cniVersion": version, "code": exc.code, "msg": exc.msg, "details": exc.details}
        out, rc = json.dumps(body), 1
    append_jsonl(settings["recordFile"], base | {"phase": "end", "rc": rc, "stdout": out})
    sys.stdout.write(out)
    sys.stdout.flush()
    sys.exit(rc)
