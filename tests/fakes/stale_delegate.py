"""FAKE DELEGATE, for tests only: a CNI plugin that fails DEL when it holds no state.

It stands for behaviour that no installable part shows: the seed report's delegate chain (kube-ovn
behind multus without its cache) rejecting a DEL for an attachment whose ADD never completed, with
"server_socket is required in cni.conf". Real multus v4.3.0 never fails a DEL for want of its cache
(README "Behind multus"), so not even multus shows it. Debian's reference plugins all treat such a
DEL as success, so they cannot reproduce the deadlock cni-delguard exists to break.

It keeps one state file per (containerID, ifname) in its `stateDir` (written by ADD, removed by a
successful DEL) and appends one JSON line per invocation to its `recordFile`, so tests can prove
whether, how often and with which stdin it was called. Knobs, all in its own plugin config:

    stateDir         where its state files live (required)
    recordFile       JSON-lines log of invocations (optional)
    failAdd          CNI error code to return from ADD (optional)
    failDel          CNI error code to return from DEL even when state exists (optional)
    hang             list of commands that sleep instead of answering, e.g. ["ADD"] (optional)
    hangSeconds      how long "hang" sleeps (default 3600)
    hangWhile        with "hang": hang only while this file exists (a test heals the delegate
                     by removing it, without rewriting a conf that an installer has wrapped)
    addHangAfterState  with "ADD" in hang: write the state file first, then hang
    delStdout        text printed on a successful DEL (to prove a wrapper passes it unchanged)
    cniDir           behave like multus's scratch cache (multus v4 CmdAdd saves its delegates
                     to <cniDir>/<containerID> before it runs any of them, and with
                     retryDeleteOnError keeps the file when a DEL fails): ADD writes that file
                     first, even when it then fails; only a successful DEL removes it

Install it with tests.support.fakes.install_fake(); it is run as a plugin (CNI_COMMAND in env).
"""

from __future__ import annotations

import json
import os
import sys
import time

SUPPORTED = ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]


def _error(version: str, code: int, msg: str, details: str = "") -> int:
    body = {"cniVersion": version, "code": code, "msg": msg, "details": details}
    sys.stdout.write(json.dumps(body))
    return 1


def _record(conf: dict[str, object], command: str, raw: str) -> None:
    path = conf.get("recordFile")
    if not isinstance(path, str):
        return
    entry = {
        "command": command,
        "containerID": os.environ.get("CNI_CONTAINERID", ""),
        "ifname": os.environ.get("CNI_IFNAME", ""),
        "pid": os.getpid(),
        "stdin": json.loads(raw) if raw else None,
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def _state_path(conf: dict[str, object]) -> str:
    state_dir = str(conf["stateDir"])
    os.makedirs(state_dir, exist_ok=True)
    return os.path.join(
        state_dir, f"{os.environ['CNI_CONTAINERID']}:{os.environ['CNI_IFNAME']}"
    )


def _save_cache(cni_dir: str, raw: str) -> None:
    os.makedirs(cni_dir, exist_ok=True)
    with open(os.path.join(cni_dir, os.environ["CNI_CONTAINERID"]), "w", encoding="utf-8") as f:
        f.write(raw)


def _delete(conf: dict[str, object], version: str) -> int:
    path = _state_path(conf)
    if not os.path.exists(path):
        # kube-ovn's answer when multus hands it a config rebuilt without runtime state.
        return _error(version, 7, "server_socket is required in cni.conf")
    if conf.get("failDel"):
        return _error(version, int(conf["failDel"]), "fake delegate: DEL refused")
    os.unlink(path)
    if isinstance(conf.get("cniDir"), str):
        cache = os.path.join(str(conf["cniDir"]), os.environ["CNI_CONTAINERID"])
        if os.path.exists(cache):
            os.unlink(cache)
    sys.stdout.write(str(conf.get("delStdout", "")))
    return 0


def main() -> int:
    command = os.environ.get("CNI_COMMAND", "")
    if command == "VERSION":
        sys.stdout.write(json.dumps({"cniVersion": "1.1.0", "supportedVersions": SUPPORTED}))
        return 0
    raw = sys.stdin.read()
    conf = json.loads(raw)
    version = str(conf.get("cniVersion", "0.3.0"))
    _record(conf, command, raw)
    hang = conf.get("hang") or []
    if isinstance(conf.get("hangWhile"), str) and not os.path.exists(str(conf["hangWhile"])):
        hang = []
    if command in hang and not (command == "ADD" and conf.get("addHangAfterState")):
        time.sleep(float(conf.get("hangSeconds", 3600)))
    if command == "ADD":
        if isinstance(conf.get("cniDir"), str):
            _save_cache(str(conf["cniDir"]), raw)
        if conf.get("failAdd"):
            return _error(version, int(conf["failAdd"]), "fake delegate: ADD refused")
        with open(_state_path(conf), "w", encoding="utf-8") as f:
            f.write(raw)
        if command in hang:
            time.sleep(float(conf.get("hangSeconds", 3600)))
        result = {"cniVersion": version, "interfaces": [], "ips": [], "dns": {}}
        if version in ("0.3.0", "0.3.1"):
            result = {"cniVersion": version, "ips": [], "dns": {}}
        sys.stdout.write(json.dumps(result))
        return 0
    if command == "DEL":
        return _delete(conf, version)
    if command in ("CHECK", "GC", "STATUS"):
        return 0
    return _error(version, 4, f"unknown CNI_COMMAND {command!r}")


if __name__ == "__main__":
    sys.exit(main())
