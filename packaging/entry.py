"""The frozen executable's entry point: the same `run` as the console script and `python -m`,
then a fast exit.

A CNI plugin is exec'd once per operation, and by the time `run` returns its answer is written.
What remains is CPython's finalization, which tears down every module the path imported (a few
ms on the skip path, more after an ADD; figures in packaging/README.md). So: run the atexit
handlers, flush the streams, and leave with os._exit.
"""

from __future__ import annotations

import atexit
import os
import sys

from cni_delguard.cli import run


def _started() -> None:
    """Tell the launcher's sentinel (packaging/launcher/launcher.c) that the guard's own code
    runs from here on: the runtime's stderr back on fd 2, one byte into the start pipe. Until
    this point a failure (the loader, libpython, the standard library, the import above) leaves
    the sentinel to print the CNI error; from here on the guard's own boundary does (cli.main).
    The variable is removed first: the delegate gets the runtime's environment."""
    value = os.environ.pop("_DELGUARD_START", None)
    if value is None:
        return  # not started by the launcher for a CNI call, or no sentinel could be had
    try:
        start, saved = (int(fd) for fd in value.split(","))
        os.dup2(saved, 2)
        os.close(saved)
        os.write(start, b"1")
        os.close(start)
    except (OSError, ValueError):  # the sentinel's own failure: it speaks, the guard runs
        pass


def _exit_status(code: object) -> int:
    """What the interpreter would make of SystemExit(code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1


def main() -> None:
    try:
        run()
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc.code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or broken: nothing more can be said there
            pass
    os._exit(status)


_started()
main()
