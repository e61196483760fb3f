"""A small process that runs guard execs for the tests and reports each one's exit and peak RSS.

Why: Linux carries a process's RSS high-water mark across fork and exec, so an exec forked from
pytest (100 MB and more) reports at least pytest's peak in ru_maxrss. Forked from this small
process instead (which forks with only its own few MB mapped), the guard's own peak is what
wait4 reports: `python -c pass` measures about 13 MB this way, one that allocates 200 MB 218 MB.

Protocol, one JSON object per line on stdin / stdout:
    {"id", "argv", "env", "stdin", "stdout", "stderr", "timeout"} (file paths for the streams)
 -> {"id", "rc", "maxrss_kb"}
Run as: python -I -S spawner.py
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

_out_lock = threading.Lock()


def _reply(body):
    line = json.dumps(body) + "\n"
    with _out_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _run(req):
    with open(req["stdin"], "rb") as i, open(req["stdout"], "wb") as o, \
            open(req["stderr"], "wb") as e:
        proc = subprocess.Popen(req["argv"], env=req["env"], stdin=i, stdout=o, stderr=e)
    timer = threading.Timer(req["timeout"], _kill, (proc.pid,))
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    _reply({"id": req["id"], "rc": proc.returncode, "maxrss_kb": usage.ru_maxrss})


def _serve(req):
    try:
        _run(req)
    except Exception as exc:  # noqa: BLE001 - report, never die: the tests wait for a reply
        _reply({"id": req["id"], "error": repr(exc)})


def main():
    for line in sys.stdin:
        threading.Thread(target=_serve, args=(json.loads(line),), daemon=True).start()


if __name__ == "__main__":
    main()
