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


def install_kube_ovn(bin_dir: Path, settings: Path, name: str = "kube-ovn") -> Path:
    """Install tests/fakes/kube_ovn.py as bin_dir/name, its settings file's path baked in (its
    knobs must not live in its CNI config, which multus rewrites: the fake's header says why)."""
    repo = FAKES.parent.parent
    target = bin_dir / name
    target.write_text(
        f"#!{sys.executable} -I\n"
        "import sys\n"
        f"sys.path.insert(0, {str(repo)!r})\n"
        "from tests.fakes.kube_ovn import main\n"
        f"main({str(settings)!r})\n",
        encoding="utf-8",
    )
    os.chmod(target, 0o755)  # noqa: S103 - a plugin in a CNI bin dir is executable
    return target


def install_slow(bin_dir: Path, name: str = "slow-delegate") -> Path:
    """Install tests/fakes/slow_delegate.py as bin_dir/name: stale_delegate.py behind a wait
    (it imports it, so the repository goes on its path)."""
    repo = FAKES.parent.parent
    target = bin_dir / name
    target.write_text(
        f"#!{sys.executable} -I\n"
        "import sys\n"
        f"sys.path.insert(0, {str(repo)!r})\n"
        "from tests.fakes.slow_delegate import main\n"
        "sys.exit(main())\n",
        encoding="utf-8",
    )
    os.chmod(target, 0o755)  # noqa: S103 - a plugin in a CNI bin dir is executable
    return target
