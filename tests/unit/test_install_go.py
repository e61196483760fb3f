"""tools/install-go.sh without root or network: the Go version the peers need (the highest `go` or
`toolchain` line of their modules) and the machine's go chosen when it is new enough.
tests/test_install_go.py shows the rest (backports' golang, then the pinned toolchain) in a
debootstrap root."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "install-go.sh"


def tree(tmp: Path, modules: dict[str, str]) -> Path:
    """A copy of the script beside a peers/ dir holding these go.mod files."""
    (tmp / "tools").mkdir()
    shutil.copy2(SCRIPT, tmp / "tools" / SCRIPT.name)
    for name, text in modules.items():
        (tmp / "peers" / name).mkdir(parents=True)
        (tmp / "peers" / name / "go.mod").write_text(f"module example.com/{name}\n\n{text}\n")
    return tmp / "tools" / SCRIPT.name


def run(script: Path, *args: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run([str(script), *args], capture_output=True, text=True, timeout=60,
                         check=True, env=env)
    return out.stdout.strip()


@pytest.mark.parametrize(
    ("modules", "need"),
    [
        pytest.param({"a": "go 1.21", "b": "go 1.20"}, "go1.21.0", id="language-version"),
        pytest.param({"a": "go 1.25.0", "b": "go 1.26.3", "c": "go 1.26.0"}, "go1.26.3",
                     id="patch-releases"),
        pytest.param({"a": "go 1.24.2\n\ntoolchain go1.25.9", "b": "go 1.25.0"}, "go1.25.9",
                     id="toolchain-line"),
        pytest.param({"a": "go 1.9", "b": "go 1.10"}, "go1.10.0", id="not-lexical"),
    ],
)
def test_need_is_the_highest_line(tmp_path: Path, modules: dict[str, str], need: str) -> None:
    assert run(tree(tmp_path, modules), "--need") == need


def test_need_of_this_repo() -> None:
    lines = re.findall(r"^(?:go|toolchain)\s+(?:go)?(\d+(?:\.\d+)*)",
                       "\n".join(p.read_text() for p in REPO.glob("peers/*/go.mod")), re.M)
    highest = max(tuple(int(n) for n in (v + ".0.0").split(".")[:3]) for v in lines)
    assert run(SCRIPT, "--need") == "go" + ".".join(map(str, highest))


def fake_go(path: Path, version: str) -> Path:
    """A `go` that answers `go env GOVERSION` (all install-go.sh asks it) with version."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\n[ "$1 $2" = "env GOVERSION" ] && echo {version}\n')
    path.chmod(0o755)
    return path


def test_the_machine_go_when_new_enough(tmp_path: Path) -> None:
    script = tree(tmp_path, {"a": "go 1.25.0"})
    old, new = fake_go(tmp_path / "old" / "go", "go1.19.8"), fake_go(tmp_path / "new" / "go",
                                                                      "go1.25.1")
    path = f"{old.parent}:{new.parent}:/usr/bin:/bin"
    assert run(script, env={"PATH": path}) == str(new)  # the first new enough, not the first
    assert run(script, env={"PATH": path, "GO": str(old)}) == str(new)
    assert run(script, env={"PATH": f"{old.parent}:/usr/bin:/bin", "GO": str(new)}) == str(new)
