"""Stands in for PyInstaller's pyimod03_ctypes in the bundle (swapped in by the spec).

PyInstaller's bootstrap calls pyimod03_ctypes.install() on every start, and whenever ctypes is in
the bundle that imports ctypes (loading _ctypes and libffi, ~1.6 ms measured) to make
ctypes.CDLL("libfoo.so") fall back to copies of libraries inside the bundle. The guard uses ctypes
only for prctl through ctypes.CDLL(None) (the process's own libc) in the delegate's forked child,
which needs no such fallback, so the skip path should not pay for it.

No `from __future__ import annotations` here: the bootstrap runs before any importer is set up.
"""


def install() -> None:
    """Nothing to install: see the module docstring."""
