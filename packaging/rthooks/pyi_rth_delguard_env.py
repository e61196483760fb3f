"""Give the guard (and so its delegate) the environment the runtime gave the executable.

PyInstaller's one-folder bootloader on Linux (6.x, read from its behaviour) re-executes itself
with LD_LIBRARY_PATH set to the bundle's _internal dir, followed by `:<the original value>` when
there was one, which it then also saves in LD_LIBRARY_PATH_ORIG; it adds _PYI_* variables for
its own bookkeeping. The dynamic loader has read LD_LIBRARY_PATH by now, so the process no longer
needs it; a delegate that inherited it would load the bundle's copies of libz, libssl, libcrypto
or libffi instead of its own (and a delegate that is itself a PyInstaller build would take the
_PYI_* variables as its own). CNI says a delegate gets the runtime's environment.

The original is taken from LD_LIBRARY_PATH itself (what follows the bundle's dir), never from
LD_LIBRARY_PATH_ORIG alone: the bootloader writes that variable only when LD_LIBRARY_PATH was set,
so without one an LD_LIBRARY_PATH_ORIG is the runtime's own variable, passed on as it is, and
must never become a live LD_LIBRARY_PATH. (With both set, the bootloader has already overwritten
the runtime's LD_LIBRARY_PATH_ORIG with LD_LIBRARY_PATH before any Python runs: that one is lost.)
"""

from __future__ import annotations

import os
import sys


def _restore_environment() -> None:
    home = getattr(sys, "_MEIPASS", None)
    current = os.environ.get("LD_LIBRARY_PATH")
    if home is not None and current is not None:
        if current == home:  # the runtime set none
            del os.environ["LD_LIBRARY_PATH"]
        elif current.startswith(home + ":"):  # the runtime's value follows the bundle's dir
            os.environ["LD_LIBRARY_PATH"] = current[len(home) + 1 :]
            os.environ.pop("LD_LIBRARY_PATH_ORIG", None)
    for name in [name for name in os.environ if name.startswith("_PYI_")]:
        del os.environ[name]


_restore_environment()
