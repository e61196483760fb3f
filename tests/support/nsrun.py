"""The one script that sets up a test's namespaces, run under `unshare` (holder.py builds the
argv): lo up when it has a network namespace of its own, each mount point the host lacks made in
an overlay of its nearest existing parent that only this namespace sees (the host's dirs are
never written), then every bind; then either exec a command in there (a one-shot run: cnitool
with the test's dir over /var/lib/cni, which libcni 1.1.2 hard-codes) or say "ready" and hold the
namespaces until stdin closes (a test node's holder).

    nsrun.py [--net] [--overlays DIR] SRC:DST... [-- ARGV...]

Standalone (stdlib only, run by path with `python -I`), so the demo uses it as the tests do.
No shell is involved.
"""

from __future__ import annotations

import os
import subprocess
import sys

USAGE = "usage: nsrun.py [--net] [--overlays DIR] SRC:DST... [-- ARGV...]"


def _run(*argv: str) -> None:
    """Its errors on stderr (the holder's, read when it fails); stdout stays the command's."""
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


def parse(argv: list[str]) -> tuple[bool, str | None, list[tuple[str, str]], list[str]]:
    """(net, overlays dir, binds, command); an empty command: hold."""
    net, overlays = False, None
    args = list(argv)
    while args and args[0] in ("--net", "--overlays"):
        flag = args.pop(0)
        if flag == "--net":
            net = True
        elif args:
            overlays = args.pop(0)
        else:
            raise SystemExit(USAGE)
    command: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, command = args[:cut], args[cut + 1:]
        if not command:
            raise SystemExit(USAGE)
    specs = [spec.split(":", 1) for spec in args]
    if any(len(spec) != 2 for spec in specs):
        raise SystemExit(USAGE)
    return net, overlays, [(src, dst) for src, dst in specs], command


def make_mount_points(binds: list[tuple[str, str]], overlays: str | None) -> None:
    """Each missing mount point made in an overlay of its nearest existing parent (an overlay
    inside one made already is not needed: that one is writable)."""
    missing = [dst for _, dst in binds if not os.path.exists(dst)]
    if missing and overlays is None:
        raise SystemExit("no mount point for " + ", ".join(missing))
    parents = set()
    for dst in missing:
        parent = os.path.dirname(dst)
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        parents.add(parent)
    done: list[str] = []
    for i, parent in enumerate(sorted(parents, key=len)):
        if parent == "/":
            raise SystemExit("no parent to overlay below /")
        if any(parent == d or parent.startswith(d + "/") for d in done):
            continue
        up, work = f"{overlays}/{i}/up", f"{overlays}/{i}/work"
        os.makedirs(up)
        os.makedirs(work)
        _run("mount", "-t", "overlay", "overlay", "-o",
             f"lowerdir={parent},upperdir={up},workdir={work}", parent)
        done.append(parent)
    for src, dst in binds:
        if dst in missing:
            if os.path.isdir(src):
                os.makedirs(dst)
            else:
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                open(dst, "x").close()  # an empty file to bind over


def main(argv: list[str]) -> None:
    net, overlays, binds, command = parse(argv)
    if net:
        _run("ip", "link", "set", "lo", "up")
    make_mount_points(binds, overlays)
    for src, dst in binds:
        _run("mount", "--bind", src, dst)
    if command:
        os.execvp(command[0], command)  # noqa: S606 - exec without a shell is the point
    print("ready", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main(sys.argv[1:])
