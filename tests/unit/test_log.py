"""The decision log: JSON lines, never stdout, rotated, never fatal."""

from __future__ import annotations

import json
import os
import stat

from cni_delguard.guard import log
from tests.support.paths import widened_dir

WIDE = widened_dir()


def test_lines_are_json_with_the_fields(tmp_path):
    path = tmp_path / "d" / "delguard.log"
    logger = log.Logger(str(path), "info", WIDE)
    logger.event("info", command="DEL", decision="skip")
    logger.event("debug", command="DEL", decision="hidden")
    [line] = path.read_text().splitlines()
    rec = json.loads(line)
    assert rec["command"] == "DEL" and rec["decision"] == "skip" and rec["level"] == "info"
    assert rec["ts"].endswith("Z")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_rotation_keeps_one_previous_generation(tmp_path, monkeypatch):
    monkeypatch.setattr(log, "MAX_BYTES", 200)
    path = tmp_path / "delguard.log"
    logger = log.Logger(str(path), "info", WIDE)
    for i in range(10):
        logger.event("info", n=i, pad="x" * 50)
    logger.event("info", n=10)
    assert (tmp_path / "delguard.log.1").exists()
    assert path.stat().st_size <= 200
    numbers = [
        json.loads(x)["n"]
        for p in (tmp_path / "delguard.log.1", path)
        for x in p.read_text().splitlines()
    ]
    assert numbers == sorted(numbers)
    assert numbers[-1] == 10


def test_an_unwritable_log_goes_to_stderr_not_stdout(tmp_path, capsys):
    target = tmp_path / "target"
    target.write_text("")
    os.symlink(target, tmp_path / "link.log")
    log.Logger(str(tmp_path / "link.log"), "info", WIDE).event("info", x=1)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "cannot write log" in captured.err
    assert target.read_text() == ""


def test_an_empty_path_disables_the_log(tmp_path, capsys):
    log.Logger("", "debug").event("error", x=1)
    assert capsys.readouterr() == ("", "")
