"""Fake node roots that a plugin can run in, as the installer, `ready` and `doctor` run it.

Those three run the plugin with the node's root as / (a chroot into `--root`), so that what runs
on the node is what is checked. A test's node root is a temp dir: a plugin that is a `#!/bin/sh`
script runs there only if the root has a /bin/sh, and a link to a bundle outside the root does not
resolve in it. `with_shell` gives a root the userland of a minimal node: Debian's static busybox at
/bin/busybox with its applets linked in /bin (sh, cat, dirname, readlink, mv, printf ...), and no C
library. Chroot needs root: `needs_root` is the reason every such test gives when it is skipped.
`overlay`, `proc_mounted` and `bound_file` make a node root from a Debian template
(tools/make-root.sh) with /proc and a network namespace in it, and undo every mount.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mounts import mount, umount

BUSYBOX = Path("/bin/busybox")  # Debian's busybox-static (tools/install-deps.sh test)
NEEDS_ROOT = "runs the plugin chrooted into the node's root, as the installer does: needs root"


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip(NEEDS_ROOT)


def with_shell(root: Path) -> Path:
    """Give `root` a /bin with a static busybox and its applets; return `root`."""
    needs_root()
    if not BUSYBOX.is_file():
        pytest.fail(f"{BUSYBOX} is missing: install Debian's busybox-static "
                    "(tools/install-deps.sh test)")
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUSYBOX, bin_dir / "busybox")
    subprocess.run(["chroot", str(root), "/bin/busybox", "--install", "-s", "/bin"], check=True)
    return root


def shell_plugin(path: Path, script: str) -> Path:
    """A plugin that is a /bin/sh script (it runs in a root `with_shell` made)."""
    path.write_text(f"#!/bin/sh\n{script}", encoding="utf-8")
    path.chmod(0o755)
    return path


VERSION_ANSWER = """[ "$CNI_COMMAND" = VERSION ] &&
    exec echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}'
exit 1
"""


@contextlib.contextmanager
def overlay(template: Path, work: Path) -> Iterator[Path]:
    """A writable view of a template root (tools/make-root.sh): an overlay mount whose writes go to
    `work`, never into the template; unmounted afterwards."""
    upper, scratch, merged = work / "upper", work / "work", work / "root"
    for d in (upper, scratch, merged):
        d.mkdir(parents=True)
    mount("-t", "overlay", "overlay", "-o",
          f"lowerdir={template},upperdir={upper},workdir={scratch}", str(merged))
    try:
        yield merged
    finally:
        umount(merged)


@contextlib.contextmanager
def proc_mounted(root: Path) -> Iterator[Path]:
    """`root`/proc, as every host has it, for the time of the block."""
    (root / "proc").mkdir(exist_ok=True)
    mount("-t", "proc", "proc", str(root / "proc"))
    try:
        yield root / "proc"
    finally:
        umount(root / "proc")


@contextlib.contextmanager
def bound_file(source: Path, root: Path, inside: str) -> Iterator[Path]:
    """`source` (a netns file, say) bind-mounted at `inside` in the node's root."""
    target = root / inside.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.touch()
    mount("--bind", str(source), str(target))
    try:
        yield target
    finally:
        umount(target)
