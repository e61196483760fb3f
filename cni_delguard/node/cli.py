"""Command line of `cni-delguard install` / `cni-delguard uninstall`.

`main(argv)` is called by cni_delguard.cli with argv[0] == "install" or "uninstall". Messages go
to stderr, `--dry-run` prints the diff on stdout. This is the one place where errors become a
single line on stderr and an exit code: 0 done, 1 refused or failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import threading
from typing import Any, TextIO

from cni_delguard.guard import defaults
from cni_delguard.node import actions, watch
from cni_delguard.node.errors import InstallerError
from cni_delguard.tooling import Parser, UsageError

PROG = "cni-delguard"


def build_parser(out: TextIO | None = None, err: TextIO | None = None) -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG, description="Put cni-delguard on a node, or take it off.", out=out, err=err
    )
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def register(sub: Any) -> None:
    """Add `install` and `uninstall` to a parser's subcommands (also cni_delguard.cli's)."""
    inst = sub.add_parser(
        "install",
        help="copy the bundle into the bin dir and wrap the conf",
        description="Copy the bundle into the CNI bin dir and wrap the conf the runtime uses.",
    )
    uninst = sub.add_parser(
        "uninstall",
        help="restore the conf and remove the bundle",
        description="Put the original conf back byte for byte, then remove the bundle.",
    )
    for p in (inst, uninst):
        _add_common(p)
        p.set_defaults(run=run)
    _add_install(inst)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bin-dir", default="/opt/cni/bin", help="CNI bin dir (%(default)s)")
    p.add_argument("--conf-dir", default="/etc/cni/net.d", help="CNI conf dir (%(default)s)")
    p.add_argument(
        "--conf-file",
        metavar="NAME",
        help="conf file in the conf dir (default: the "
        "one the runtime uses, the first .conf/.conflist/.json by name)",
    )
    p.add_argument(
        "--wrap", metavar="TYPE", default="multus", help="plugin type to wrap (%(default)s)"
    )
    p.add_argument(
        "--state-dir",
        metavar="DIR",
        help="the guard's stateDir; the installer keeps "
        f"originals in DIR/installer (default {defaults.STATE_DIR})",
    )
    p.add_argument(
        "--root",
        metavar="DIR",
        default="/",
        help="where the node's / is mounted; the dirs above are taken under it (%(default)s)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the diff, change nothing")


def _add_install(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bundle-dir",
        metavar="DIR",
        help="one-folder bundle to install (default: the folder of this frozen executable)",
    )
    p.add_argument("--no-bundle", action="store_true", help="only patch the conf")
    p.add_argument("--log-file", metavar="PATH", help="the guard's logFile ('' disables)")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"))
    p.add_argument(
        "--mode",
        choices=("enforce", "observe"),
        help="the guard's mode: observe forwards every DEL and only logs what it would have "
        "decided (default: leave the conf's mode as it is; a new guard enforces)",
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="stay running and re-apply the patch when the conf is rewritten",
    )
    p.add_argument("--watch-interval", type=float, default=2.0, metavar="SECONDS")
    p.add_argument(
        "--max-repatches",
        type=int,
        default=5,
        metavar="N",
        help="re-patches allowed per --repatch-window before backing off",
    )
    p.add_argument("--repatch-window", type=float, default=600.0, metavar="SECONDS")


def options(args: argparse.Namespace) -> actions.Options:
    keys: dict[str, Any] = {}
    guard_keys = (
        ("state_dir", "stateDir"),
        ("log_file", "logFile"),
        ("log_level", "logLevel"),
        ("mode", "mode"),
    )
    for attr, key in guard_keys:
        if getattr(args, attr, None) is not None:
            keys[key] = getattr(args, attr)
    bundle_dir = None
    if args.command == "install" and not args.no_bundle:
        bundle_dir = args.bundle_dir or default_bundle_dir()
    return actions.Options(
        bin_dir=under(args.root, args.bin_dir),
        conf_dir=under(args.root, args.conf_dir),
        conf_file=args.conf_file,
        wrap=args.wrap,
        state_dir=under(args.root, args.state_dir or defaults.STATE_DIR),
        bundle_dir=bundle_dir,
        keys=keys,
        dry_run=args.dry_run,
    )


def under(root: str, path: str) -> str:
    """`path` as seen on the node, reached through `root` (the conf keeps the node's own paths)."""
    if not path.startswith("/"):
        raise UsageError(f"{path!r} must be an absolute path")
    return os.path.normpath(os.path.join(root, path.lstrip("/")))


def default_bundle_dir() -> str:
    if not getattr(sys, "frozen", False):
        raise UsageError("not running from the frozen bundle: pass --bundle-dir DIR or --no-bundle")
    return os.path.dirname(os.path.realpath(sys.executable))


def main(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """`install ...` or `uninstall ...` on their own (the tests' way in)."""
    out = out if out is not None else sys.stdout
    stderr = err if err is not None else sys.stderr
    try:
        args = build_parser(out, stderr).parse_args(argv)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except UsageError as exc:
        stderr.write(f"{PROG}: usage: {exc}\n")
        return 2
    return run(args, out, stderr)


def run(args: argparse.Namespace, out: TextIO, stderr: TextIO) -> int:
    def say(message: str) -> None:
        stderr.write(f"{PROG}: {message}\n")
        stderr.flush()

    try:
        opts = options(args)
        if args.command == "uninstall":
            actions.uninstall(opts, out, say)
        elif args.watch:
            _watch(args, opts, say)
        else:
            actions.install(opts, out, say)
    except UsageError as exc:
        say(f"usage: {exc}")
        return 2
    except InstallerError as exc:
        say(str(exc))
        return 1
    except OSError as exc:  # fsutil.UnsafeFileError included
        say(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))
        return 1
    return 0


def _watch(args: argparse.Namespace, opts: actions.Options, say: actions.Say) -> None:
    if args.dry_run:
        raise UsageError("--watch and --dry-run do not go together")
    if opts.bundle_dir is not None:
        actions.install_bundle(opts, say)
    limits = watch.Limits(
        interval=args.watch_interval,
        settle=min(1.0, args.watch_interval),
        max_repatches=args.max_repatches,
        window=args.repatch_window,
    )
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    say(f"watching {opts.conf_dir} (every {limits.interval:g} s)")
    watch.run(dataclasses.replace(opts, bundle_dir=None), limits, stop, say)
    say("watch: stopped")
