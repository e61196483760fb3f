"""Run a program with SIGCHLD ignored or blocked: `sigstate.py ignore|block -- ARGV...`.

Both survive exec (a signal's ignored disposition and the blocked mask are inherited; a handler
is not), so the program starts as it would under a runtime, a shell or a supervisor that left
SIGCHLD that way: no test hook in the product, only what a parent can hand it.
"""

from __future__ import annotations

import os
import signal
import sys


def main(argv: list[str]) -> None:
    how, sep, *command = argv
    assert sep == "--" and command and how in ("ignore", "block"), __doc__
    if how == "ignore":
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    else:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    os.execv(command[0], command)  # noqa: S606 - exec of the program under test, no shell


if __name__ == "__main__":
    main(sys.argv[1:])
