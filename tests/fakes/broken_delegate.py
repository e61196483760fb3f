"""FAKE DELEGATE, for tests only: a broken CNI plugin that misbehaves on purpose.

It stands for delegates that a guard on a node must survive without a traceback, a hang or a
memory blow-up: one that prints megabytes, prints garbage or a non-object, never exits, answers
with a malformed CNI error, or leaves a daemon behind holding its stdout open. No reference plugin
misbehaves like that on demand.

Knobs, in its own plugin config:

    misbehave    one of: "huge-garbage", "huge-json", "garbage", "non-object", "never-exit",
                 "bad-error-code", "silent-failure", "stdout-held" (see MODES below)
    commands     the commands that misbehave (default: all); others succeed quietly
    bytes        how much "huge-*" prints (default 8 MiB)
    recordFile   JSON lines {"command", "pid", "mode"} appended before misbehaving
    pidDir       "stdout-held" writes the daemon's pid to <pidDir>/daemon.pid

Install it with tests.support.fakes.install_fake(bin_dir, "broken", "broken_delegate.py").
"""

from __future__ import annotations

import json
import os
import sys
import time

MODES = {
    "huge-garbage": "print `bytes` of non-JSON, exit 0",
    "huge-json": "print a valid result padded to `bytes`, exit 0",
    "garbage": "print binary junk, exit 0",
    "non-object": "print a JSON array, exit 0",
    "never-exit": "print nothing and sleep for an hour",
    "bad-error-code": 'exit 1 with {"code": "eleven"}',
    "silent-failure": "exit 3 with no output",
    "stdout-held": "fork a daemon (own session) that keeps stdout open; the parent exits 0",
}


def _record(conf: dict[str, object], command: str, mode: str) -> None:
    path = conf.get("recordFile")
    if isinstance(path, str):
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"command": command, "pid": os.getpid(), "mode": mode}) + "\n")


def _huge(size: int, as_json: bool) -> int:
    if as_json:
        pad = "x" * max(0, size - 64)
        sys.stdout.write(json.dumps({"cniVersion": "1.0.0", "interfaces": [], "pad": pad}))
    else:
        chunk = b"\xffgarbage" * 8192
        written = 0
        while written < size:
            sys.stdout.buffer.write(chunk)
            written += len(chunk)
    sys.stdout.flush()
    return 0


def _stdout_held(conf: dict[str, object]) -> int:
    pid = os.fork()
    if pid == 0:
        os.setsid()
        time.sleep(3600)
        os._exit(0)
    path = os.path.join(str(conf["pidDir"]), "daemon.pid")
    with open(f"{path}.{os.getpid()}", "w", encoding="utf-8") as f:  # whole or not at all
        f.write(str(pid))
    os.rename(f"{path}.{os.getpid()}", path)
    sys.stdout.write(json.dumps({"cniVersion": "1.0.0", "interfaces": []}))
    sys.stdout.flush()
    return 0


def _misbehave(conf: dict[str, object], mode: str) -> int:
    size = int(conf.get("bytes", 8 * 1024 * 1024))  # type: ignore[call-overload]
    if mode in ("huge-garbage", "huge-json"):
        return _huge(size, mode == "huge-json")
    if mode == "garbage":
        sys.stdout.buffer.write(b"\x00\xff\xfe{not json")
        return 0
    if mode == "non-object":
        sys.stdout.write("[1, 2, 3]")
        return 0
    if mode == "never-exit":
        time.sleep(3600)
        return 0
    if mode == "bad-error-code":
        sys.stdout.write(json.dumps({"cniVersion": "1.0.0", "code": "eleven", "msg": "bad"}))
        return 1
    if mode == "silent-failure":
        return 3
    if mode == "stdout-held":
        return _stdout_held(conf)
    raise SystemExit(f"broken_delegate: unknown mode {mode!r}")


def main() -> int:
    command = os.environ.get("CNI_COMMAND", "")
    if command == "VERSION":
        sys.stdout.write(json.dumps({"cniVersion": "1.1.0", "supportedVersions": ["1.0.0"]}))
        return 0
    conf = json.loads(sys.stdin.buffer.read())
    mode = str(conf.get("misbehave", ""))
    commands = conf.get("commands")
    if isinstance(commands, list) and command not in commands:
        if command == "ADD":
            sys.stdout.write(json.dumps({"cniVersion": "1.0.0", "interfaces": []}))
        return 0
    _record(conf, command, mode)
    return _misbehave(conf, mode)


if __name__ == "__main__":
    # A Go plugin writing to a pipe the guard has closed (it stops reading past its output
    # limit) dies of SIGPIPE without a word. Python ignores SIGPIPE and would raise
    # BrokenPipeError instead, printing a traceback on the stderr the guard passes through,
    # depending on how far the write got when the pipe closed: a flaky test, not a guard bug.
    import signal

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
