"""What this program was built as: its version, its arch, the Python and C library it carries.

The frozen bundle has `delguard-build.json` in its `_internal/` folder, written by
packaging/selfcontain.py from the build root itself (the arch of its ELF files, the build
Python's version, the glibc it copied in). Run from source, the arch is this machine's and the
Python is the one running. Read by `cni-delguard --version` / `version` and the installer (the
manifest of a version it installs names its arch); never on a CNI call's path.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from typing import Any

from cni_delguard import __version__

FILE = "delguard-build.json"
# What `uname -m` says, as Debian (and Kubernetes' kubernetes.io/arch, and OCI images) name it.
ARCHES = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le"}


def info() -> dict[str, Any]:
    """{"version", "arch", "python", "glibc", "frozen"}; "glibc" is None when unknown."""
    home = getattr(sys, "_MEIPASS", None)
    if home is not None:
        try:
            with open(os.path.join(home, FILE), "rb") as f:
                built = json.loads(f.read(65536))
        except (OSError, ValueError):
            built = None  # a bundle from before the file existed: say what can be seen
        if isinstance(built, dict):
            return {"version": __version__, "frozen": True, **built}
    machine = platform.machine()
    return {
        "version": __version__,
        "arch": ARCHES.get(machine, machine),
        "python": platform.python_version(),
        "glibc": os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None,
        "frozen": home is not None,
    }


def line() -> str:
    """`cni-delguard 0.1.0 (arm64; frozen, Python 3.11.2, glibc 2.36)`."""
    i = info()
    how = "frozen" if i.get("frozen") else "from source"
    libc = f", {i['glibc']}" if i.get("glibc") else ""
    return f"cni-delguard {i['version']} ({i.get('arch')}; {how}, Python {i.get('python')}{libc})"
