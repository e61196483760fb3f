"""Launcher run as a script under `unshare --mount`: bind-mount directories, then exec a command.

    unshare --mount --propagation private -- python -I nsrun.py SRC:DST [SRC:DST...] -- ARGV...

The mounts exist only in the private mount namespace unshare made, so the host never sees them.
cnitool (built from Debian's CNI 1.1.2) hard-codes its cache dir to /var/lib/cni; binding a test's
own directory over it keeps each test's libcni cache under its tmp_path. No shell is involved.
"""

from __future__ import annotations

import os
import subprocess
import sys


def _split(argv: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    if "--" not in argv:
        raise SystemExit("usage: nsrun.py SRC:DST... -- ARGV...")
    cut = argv.index("--")
    binds = [tuple(spec.split(":", 1)) for spec in argv[:cut]]
    command = argv[cut + 1 :]
    if not command or any(len(b) != 2 for b in binds):
        raise SystemExit("usage: nsrun.py SRC:DST... -- ARGV...")
    return [(b[0], b[1]) for b in binds], command


def main(argv: list[str]) -> None:
    binds, command = _split(argv)
    for src, dst in binds:
        subprocess.run(["mount", "--bind", src, dst], check=True)
    os.execvp(command[0], command)  # noqa: S606 - exec without a shell is the point


if __name__ == "__main__":
    main(sys.argv[1:])
