"""FAKE DELEGATE, for tests only: a CNI plugin whose timing the test controls through gates.

It stands for any delegate (multus, kube-ovn, or a real reference plugin it wraps) at a known
instant of its life, so a reliability test can SIGKILL the guard exactly while the delegate has not
started its work, has done it but not answered, or has answered. No installable plugin can be
paused like that.

Behaviour (all knobs in its own plugin config):

    stateDir         one state file per (containerID, ifname): ADD writes it, DEL removes it
    recordFile       JSON lines: {"phase": "start"|"end", "command", "containerID", "ifname",
                     "pid"}
    gateDir, gates   e.g. ["ADD:start", "DEL:done"]: at that point the fake creates the FIFO
                     <gateDir>/<containerID>.<COMMAND>.<point>.fifo, writes its pid to ...pid (after
                     the FIFO exists) and blocks reading it until the test opens and closes it.
                     "start" is before any work, "done" after the work and before the answer.
    target           absolute path of a real plugin (e.g. Debian's bridge): the work is running it
                     with the same environment and stdin; its stdout and exit code become ours.
    delWithoutState  without target, what DEL does when no state file exists: "fail" (default:
                     kube-ovn's answer through multus without its cache, code 7 "server_socket is
                     required in cni.conf") or "succeed" (what the spec asks).
    spawnChild       on ADD, start a child process (sleep) in the fake's process group and write its
                     pid to <gateDir>/<containerID>.child.pid: a delegate that runs plugins of its
                     own (multus running kube-ovn).

Install it with tests.support.fakes.install_fake(bin_dir, "gated", "gated_delegate.py").
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

SUPPORTED = ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]


def _record(conf: dict[str, object], phase: str, command: str) -> None:
    path = conf.get("recordFile")
    if not isinstance(path, str):
        return
    entry = {
        "phase": phase,
        "command": command,
        "containerID": os.environ.get("CNI_CONTAINERID", ""),
        "ifname": os.environ.get("CNI_IFNAME", ""),
        "pid": os.getpid(),
    }
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
    finally:
        os.close(fd)


def _gate(conf: dict[str, object], command: str, point: str) -> None:
    gates = conf.get("gates") or []
    if f"{command}:{point}" not in gates:
        return
    cid = os.environ.get("CNI_CONTAINERID", "")
    base = os.path.join(str(conf["gateDir"]), f"{cid}.{command}.{point}")
    try:
        os.mkfifo(base + ".fifo", 0o600)
    except FileExistsError:
        pass
    _write_pid(base + ".pid", os.getpid())
    with open(base + ".fifo", "rb") as fifo:
        fifo.read()


def _state_path(conf: dict[str, object]) -> str:
    """<stateDir>/<containerID>:<ifname>, or sha256-<hex> of that when too long for a name."""
    state_dir = str(conf["stateDir"])
    os.makedirs(state_dir, exist_ok=True)
    name = f"{os.environ['CNI_CONTAINERID']}:{os.environ['CNI_IFNAME']}"
    if len(name.encode("utf-8", "surrogateescape")) > 200:
        name = "sha256-" + hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()
    return os.path.join(state_dir, name)


def _error(version: str, code: int, msg: str) -> tuple[int, bytes]:
    return 1, json.dumps({"cniVersion": version, "code": code, "msg": msg}).encode()


def _spawn_child(conf: dict[str, object]) -> None:
    child = subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    path = os.path.join(str(conf["gateDir"]), f"{os.environ.get('CNI_CONTAINERID', '')}.child.pid")
    _write_pid(path, child.pid)


def _write_pid(path: str, pid: int) -> None:
    """Written whole or not at all (a temp file renamed): a test that sees the file reads it."""
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(str(pid))
    os.rename(tmp, path)


def _own_work(conf: dict[str, object], command: str, raw: bytes) -> tuple[int, bytes]:
    version = str(conf.get("cniVersion", "1.0.0"))
    if command == "ADD":
        if conf.get("spawnChild"):
            _spawn_child(conf)
        with open(_state_path(conf), "wb") as f:
            f.write(raw)
        result = {"cniVersion": version, "interfaces": [], "ips": [], "dns": {}}
        return 0, json.dumps(result).encode()
    if command == "DEL":
        path = _state_path(conf)
        if not os.path.exists(path):
            if conf.get("delWithoutState", "fail") == "succeed":
                return 0, b""
            return _error(version, 7, "server_socket is required in cni.conf")
        os.unlink(path)
        return 0, b""
    return 0, b""


def _work(conf: dict[str, object], command: str, raw: bytes) -> tuple[int, bytes]:
    target = conf.get("target")
    if isinstance(target, str):
        res = subprocess.run([target], input=raw, stdout=subprocess.PIPE, check=False)
        return res.returncode, res.stdout
    return _own_work(conf, command, raw)


def main() -> int:
    command = os.environ.get("CNI_COMMAND", "")
    if command == "VERSION":
        sys.stdout.write(json.dumps({"cniVersion": "1.1.0", "supportedVersions": SUPPORTED}))
        return 0
    raw = sys.stdin.buffer.read()
    conf = json.loads(raw)
    _record(conf, "start", command)
    _gate(conf, command, "start")
    rc, out = _work(conf, command, raw)
    _gate(conf, command, "done")
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    _record(conf, "end", command)
    return rc


if __name__ == "__main__":
    sys.exit(main())
