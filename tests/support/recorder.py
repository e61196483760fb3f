"""RECORDING WRAPPER, for tests only: a CNI plugin that runs another plugin and records the call.

Installed into a bin dir under its own type name (e.g. `rec-bridge`), it execs the real plugin
with the same environment and stdin, passes its stderr through, prints its stdout unchanged and
exits with its exit code. Before the real plugin runs it appends a `start` line (command,
container ID, ifname, pid, stdin) to the record file, afterwards an `end` line (also stdout and
exit code). So tests can prove whether a delegate was called, and compare the guard's output with
the delegate's own bytes. Optional knobs, baked in at install time:

    answers         {"STATUS": {"code": 50, "msg": "..."}}: answer that command with this CNI
                    error (exit 1) instead of running the real plugin
    hang_after_add  after a successful real ADD, sleep instead of exiting (an ADD interrupted
                    after the delegate set things up)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.records import append_jsonl, matching, read_jsonl

REPO = Path(__file__).resolve().parents[2]


def install_recorder(
    bin_dir: Path,
    name: str,
    target: Path,
    record: Path,
    answers: dict[str, dict[str, Any]] | None = None,
    hang_after_add: bool = False,
) -> Path:
    settings = {
        "target": str(target),
        "record": str(record),
        "answers": answers or {},
        "hang_after_add": hang_after_add,
    }
    path = bin_dir / name
    path.write_text(
        f"#!{sys.executable} -I\n"
        "import sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from tests.support.recorder import main\n"
        f"main({json.dumps(settings)!r})\n",
        encoding="utf-8",
    )
    path.chmod(0o755)
    return path


def read_records(record: Path, phase: str = "start") -> list[dict[str, Any]]:
    return matching(read_jsonl(record), phase=phase)



def main(settings_json: str) -> None:
    settings = json.loads(settings_json)
    command = os.environ.get("CNI_COMMAND", "")
    raw = sys.stdin.buffer.read()
    base = {
        "command": command,
        "containerID": os.environ.get("CNI_CONTAINERID", ""),
        "ifname": os.environ.get("CNI_IFNAME", ""),
        "pid": os.getpid(),
    }
    try:
        stdin: Any = json.loads(raw) if raw else None
    except ValueError:
        stdin = raw.decode(errors="replace")
    append_jsonl(settings["record"], base | {"phase": "start", "stdin": stdin})
    answer = settings["answers"].get(command)
    if answer is not None:
        sys.stdout.write(json.dumps(answer))
        sys.stdout.flush()
        end = {"phase": "end", "stdout": json.dumps(answer), "rc": 1}
        append_jsonl(settings["record"], base | end)
        sys.exit(1)
    res = subprocess.run([settings["target"]], input=raw, stdout=subprocess.PIPE, check=False)
    out = res.stdout.decode(errors="replace")
    append_jsonl(settings["record"], base | {"phase": "end", "stdout": out, "rc": res.returncode})
    sys.stdout.write(out)
    sys.stdout.flush()
    if command == "ADD" and res.returncode == 0 and settings["hang_after_add"]:
        append_jsonl(settings["record"], base | {"phase": "hang"})
        time.sleep(3600)
    sys.exit(res.returncode)
