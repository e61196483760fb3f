"""Give the guard (and so its delegate) the environment the runtime gave the executable.

PyInstaller's one-folder bootloader on Linux re-executes itself with LD_LIBRARY_PATH pointing at
the bundle's _internal dir (the original value saved in LD_LIBRARY_PATH_ORIG) and _PYI_* variables
for its own bookkeeping. The dynamic loader has read LD_LIBRARY_PATH by now, so the process no
longer needs it; a delegate that inherited it would load the bundle's copies of libz, libssl,
libcrypto or libffi instead of its own (and a delegate that is itself a PyInstaller build would
take the _PYI_* variables as its own). CNI says a delegate gets the runtime's environment.
"""

from __future__ import annotations

import os


def _restore_environment() -> None:
    original = os.environ.pop("LD_LIBRARY_PATH_ORIG", None)
    if original is None:
        os.environ.pop("LD_LIBRARY_PATH", None)
    else:
        os.environ["LD_LIBRARY_PATH"] = original
    for name in [name for name in os.environ if name.startswith("_PYI_")]:
        del os.environ[name]


_restore_environment()
