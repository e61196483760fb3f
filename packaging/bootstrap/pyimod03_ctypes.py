"""Stands in for PyInstaller's pyimod03_ctypes in the bundle (swapped in by the spec).

PyInstaller's bootstrap calls pyimod03_ctypes.install() on every start, and whenever ctypes is in
the bundle that imports ctypes (loading _ctypes and libffi, 1.0 to 1.6 ms measured:
packaging/README.md) to make ctypes.CDLL("libfoo.so") fall back to copies of libraries inside the
bundle. The guard never imports ctypes (its guardian learns of the guard's death from a pipe), but
ctypes is in the bundle all the same: the dependency scan brings it with multiprocessing
(multiprocessing.sharedctypes). So without this stand-in every exec would pay for a module that is
never used; with it, nothing is installed and ctypes stays unloaded.

No `from __future__ import annotations` here: the bootstrap runs before any importer is set up.
"""


def install() -> None:
    """Nothing to install: see the module docstring."""
