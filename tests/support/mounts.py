"""mount(8) and umount(8) for tests that mount: every mount is undone, a busy one lazily."""

from __future__ import annotations

import subprocess
from pathlib import Path


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, timeout=30)


def umount(path: Path) -> None:
    res = subprocess.run(["umount", str(path)], check=False, capture_output=True, timeout=30)
    if res.returncode != 0:  # busy: detach lazily rather than leave it behind
        subprocess.run(["umount", "-l", str(path)], check=True, capture_output=True, timeout=30)
