"""Readers of the JSON-lines files the tests inspect: a fake delegate's record file
(tests/fakes/), the recording wrapper's (recorder.py) and the guard's decision log."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def append_jsonl(path: str | Path, entry: dict[str, Any]) -> None:
    """Append one JSON line with one write on an O_APPEND descriptor: lines from processes that
    record at once (a plugin's concurrent invocations) never interleave."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
    finally:
        os.close(fd)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSON-lines file, in order; [] when nothing was ever written to it."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def matching(rows: list[dict[str, Any]], **fields: Any) -> list[dict[str, Any]]:
    """The rows whose given fields all have the given values (None: any value)."""
    return [r for r in rows if all(v is None or r.get(k) == v for k, v in fields.items())]


def fake_calls(record: Path, command: str | None = None, **fields: Any) -> list[dict[str, Any]]:
    """What a fake delegate recorded, in order: all calls, or those of one command (and with the
    given fields, e.g. containerID=...)."""
    return matching(read_jsonl(record), command=command, **fields)


def guard_log(log_file: Path, **fields: Any) -> list[dict[str, Any]]:
    """The guard's log lines (one per decision or event), or those with the given fields, e.g.
    command="DEL"."""
    return matching(read_jsonl(log_file), **fields)
