"""The frozen guard's bootstrap: the first Python code of every exec, before the guard's own.

It stands in for PyInstaller's bootstrap (pyiboot01_bootstrap and the pyimod0* modules, left out
of the bundle by the spec), which this bundle does not need and which cost every exec about 8 M
instructions, a fifth of the skip path (packaging/README.md): its archive reader and path-entry
finder serve modules in the PYZ archive, and this one-folder build has none (noarchive: every
module is a .pyc file in _internal/, which Python's own FileFinder imports); it also lists
_internal/ and stats each entry, looking for .egg dirs, and removes VIRTUAL_ENV from the
environment, which the delegate must get as the runtime gave it. What is kept:

- `sys.frozen`, which the guard's installer reads (its own folder is the bundle it installs);
- the search path: _internal/ first (the guard and the standard library), then lib-dynload/
  (extension modules); not base_library.zip, which a noarchive build does not have;
- the environment the runtime gave the executable, for the guard and so for its delegate. The
  launcher (packaging/launcher/launcher.c) moved the variables the loader would have acted on
  aside (LD_PRELOAD, LD_AUDIT) and set LC_ALL=C, each named in _DELGUARD_RESTORE and the
  runtime's own value of each in _DELGUARD_ORIG_<NAME>: each is put back exactly as the runtime
  gave it, or removed when the runtime had not set it. It also sets three _PYI_* variables;
  run without it, the bootloader re-executes itself with LD_LIBRARY_PATH set to the bundle's
  _internal dir, followed by `:<the original value>` when there was one, which it then also
  saves in LD_LIBRARY_PATH_ORIG.
  Left in place, a delegate would load the bundle's libz/libssl/libcrypto/libffi, and a delegate
  that is itself a PyInstaller build would take the _PYI_* variables as its own. The original is
  taken from LD_LIBRARY_PATH itself (what follows the bundle's dir), never from
  LD_LIBRARY_PATH_ORIG alone: the bootloader writes that variable only when LD_LIBRARY_PATH was
  set, so without one an LD_LIBRARY_PATH_ORIG is the runtime's own, passed on as it is.

No `from __future__ import annotations`: that import alone costs 0.45 M instructions (0.2 ms).
"""

import os
import sys


def _bootstrap() -> None:
    sys.frozen = True
    home = sys._MEIPASS
    sys.path[:] = [home, *[p for p in sys.path if os.path.basename(p) == "lib-dynload"]]
    sys.path_importer_cache.clear()
    if hasattr(sys, "_pyinstaller_pyz"):
        del sys._pyinstaller_pyz
    current = os.environ.get("LD_LIBRARY_PATH")
    if current is not None:
        if current == home:  # the runtime set none
            del os.environ["LD_LIBRARY_PATH"]
        elif current.startswith(home + ":"):  # the runtime's value follows the bundle's dir
            os.environ["LD_LIBRARY_PATH"] = current[len(home) + 1 :]
            os.environ.pop("LD_LIBRARY_PATH_ORIG", None)
    environ = os.environ
    for name in environ.pop("_DELGUARD_RESTORE", "").split(","):
        if name:
            value = environ.pop("_DELGUARD_ORIG_" + name, None)
            if value is None:
                environ.pop(name, None)
            else:
                environ[name] = value
    for name in [name for name in environ if name.startswith("_PYI_")]:
        del environ[name]


_bootstrap()
del _bootstrap
