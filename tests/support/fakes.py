"""Install the test-only fake plugins (tests/fakes/) as executables in a CNI bin dir."""

from __future__ import annotations

import os
import sys
from pathlib import Path

FAKES = Path(__file__).resolve().parent.parent / "fakes"


def install_fake(
    bin_dir: Path, name: str = "stale-delegate", source: str = "stale_delegate.py"
) -> Path:
    """Write FAKES/source into bin_dir/name with a shebang naming this interpreter (no shell)."""
    body = (FAKES / source).read_text(encoding="utf-8")
    target = bin_dir / name
    target.write_text(f"#!{sys.executable} -I\n{body}", encoding="utf-8")
    os.chmod(target, 0o755)  # noqa: S103 - a plugin in a CNI bin dir is executable
    return target
