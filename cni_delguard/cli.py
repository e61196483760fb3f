"""The process boundary: the only place that prints a CNI error and chooses the exit code.

`main` takes argv, the environment and the three streams, so tests drive it with a dict and byte
buffers. With CNI_COMMAND set it is a CNI plugin (argv is ignored, as runtimes pass none); without
it, it is a tool for people, on argparse subcommands (`cni-delguard --help`).
"""

from __future__ import annotations

import os
import sys

from cni_delguard import CURRENT_VERSION
from cni_delguard.cni import errors

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping
    from typing import BinaryIO, TextIO

    from cni_delguard.guard.config import Defaults

DESCRIPTION = """\
A CNI meta-plugin that lets DEL succeed when ADD never happened. The container runtime runs it
with CNI_COMMAND set (the plugin); without CNI_COMMAND it is the operator's tool below."""


def main(
    argv: list[str], environ: Mapping[str, str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO
) -> int:
    if _from_a_runtime(argv, environ):
        return plugin_main(environ, stdin, stdout)
    import io

    out = io.TextIOWrapper(stdout, encoding="utf-8", errors="replace", write_through=True)
    try:
        return tool_main(argv, out, stderr)
    finally:
        out.flush()
        out.detach()


# Variables a runtime sets for every call and a person at a terminal does not export (CNI_PATH
# and CNI_ARGS may well be exported by someone who runs cnitool).
_RUNTIME_ONLY = ("CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME")


def _from_a_runtime(argv: list[str], environ: Mapping[str, str]) -> bool:
    """CNI_COMMAND set: the plugin (argv ignored). No arguments and another of a call's
    variables set: a runtime that forgot CNI_COMMAND, which gets CNI error JSON (code 4) like
    any bad environment. Otherwise a person: the operator's commands, or the usage."""
    if "CNI_COMMAND" in environ:
        return True
    return not argv and any(name in environ for name in _RUNTIME_ONLY)


def plugin_main(
    environ: Mapping[str, str], stdin: BinaryIO, stdout: BinaryIO, *, dflt: Defaults | None = None
) -> int:
    """The CNI plugin. `dflt`: what a config leaves out, the guard's own unless a test gives its
    own (config.Defaults)."""
    version = CURRENT_VERSION
    try:
        from cni_delguard.cni import skel

        inv = skel.parse_env(environ)
        if inv.command == "VERSION":
            from cni_delguard.commands import version as cmd_version

            out = cmd_version.run()
        else:
            data = _read(stdin, inv.command)
            version = _version_of(data) or version
            from cni_delguard.commands import dispatch
            from cni_delguard.commands.context import Context

            out = dispatch(Context(inv, environ, dflt), data)
    except errors.CniError as exc:
        err = exc
    except OSError as exc:  # a file or process operation no narrower handler expected
        err = errors.CniError(errors.IO_FAILURE, "I/O failure in cni-delguard", str(exc)[:500])
    except Exception as exc:  # noqa: BLE001 - the runtime must get CNI JSON, never a traceback
        err = errors.CniError(errors.INTERNAL, "internal error in cni-delguard", repr(exc)[:500])
    else:
        return 0 if _answer(stdout, out) else 1
    _answer(stdout, err.to_json(version))
    return err.exit_code()


def _answer(stdout: BinaryIO, data: bytes) -> bool:
    """Write the CNI answer; a runtime that has gone away (closed or broken stdout) gets none,
    and that is said on stderr, never with a traceback."""
    try:
        stdout.write(data)
        stdout.flush()
    except (OSError, ValueError) as exc:
        try:
            sys.stderr.write(f"cni-delguard: cannot write the answer to stdout: {exc}\n")
        except (OSError, ValueError, AttributeError):
            pass
        return False
    return True


def _read(stdin: BinaryIO, command: str) -> bytes:
    """Bounded stdin. An oversized config is garbage like any other: for DEL it only means
    there is no config to read (evidence decides), so DEL gets empty bytes instead of an error."""
    from cni_delguard.cni import skel

    try:
        return skel.read_stdin(stdin)
    except errors.CniError:
        if command != "DEL":
            raise
        return b""


def _version_of(data: bytes) -> str | None:
    """The config's cniVersion for our own error JSON, if it can be found cheaply."""
    from cni_delguard import SUPPORTED_VERSIONS

    marker = b'"cniVersion"'
    at = data.find(marker)
    if at < 0:
        return None
    tail = data[at + len(marker) : at + len(marker) + 24].lstrip(b" \t\r\n:").lstrip()
    for version in SUPPORTED_VERSIONS:
        if tail.startswith(b'"' + version.encode() + b'"'):
            return version
    return None


def build_parser(out: TextIO, err: TextIO) -> argparse.ArgumentParser:
    """Every subcommand registers itself from its own module (the tools' floors); `install`'s
    long-running mode from the watcher's, which sits above node/, ops/ and monitoring/. The
    monitoring package's textfile is connected here to `stats --prometheus` (ops/, below it)."""
    from cni_delguard import buildinfo, watcher
    from cni_delguard.node import cli as node_cli
    from cni_delguard.ops import assess, bugreport, doctor, listing, release, stats
    from cni_delguard.tooling import Parser

    parser = Parser(prog="cni-delguard", description=DESCRIPTION, out=out, err=err)
    parser.add_argument("--version", action="version", version=buildinfo.line())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    stats.register(sub, textfile=_textfile)
    listing.register(sub)
    doctor.register(sub)
    assess.register(sub)
    release.register(sub)
    bugreport.register(sub)
    watcher.add_options(node_cli.register(sub)["install"])
    version = sub.add_parser("version", help="print the version and exit")
    version.set_defaults(run=lambda _args, o, _e: _print_version(o))
    return parser


def _textfile(path: str, log_file: str, state_dir: str) -> None:
    """`stats --prometheus FILE`: the monitoring package's textfile, for ops/'s `stats` (a
    floor below it, which cannot import it). Imported only when asked for."""
    from cni_delguard.monitoring import metrics

    metrics.write(path, log_file, state_dir)


def _print_version(out: TextIO) -> int:
    from cni_delguard import buildinfo

    out.write(buildinfo.line() + "\n")
    return 0


def tool_main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """The operator's commands. Help goes to stdout (exit 0); a usage error is one line on
    stderr after the usage (exit 2); each command returns its own exit code."""
    from cni_delguard.tooling import UsageError

    parser = build_parser(out, err)
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        parser.print_usage(err)
        err.write(f"cni-delguard: error: {exc}\n")
        return 2
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    if getattr(args, "run", None) is None:
        # Run with neither CNI_COMMAND nor a subcommand: a person at a terminal, not a runtime.
        parser.print_usage(err)
        err.write("cni-delguard: error: a COMMAND is needed (a runtime sets CNI_COMMAND)\n")
        return 2
    code: int = args.run(args, out, err)
    return code


def plugin_signals() -> None:
    """As a plugin, SIGINT ends the process as SIGTERM does (the default action): no
    KeyboardInterrupt unwinding through half an operation to a traceback. What a killed guard
    leaves is what the crash tests cover: the guardian kills the delegate, the next DEL recovers.
    SIGPIPE stays ignored (Python's choice): a delegate that exits before reading its stdin must
    not kill the guard; a closed stdout is handled where the answer is written."""
    if "CNI_COMMAND" in os.environ:
        if TYPE_CHECKING:
            import signal as _signal
        else:
            import _signal  # the C module: `signal`'s enum layer costs start-up (spawn.py)

        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)


def run() -> None:
    """Console-script, `python -m` and frozen-binary entry point."""
    import io

    plugin_signals()
    # A stream the runtime closed before the exec is None in Python.
    stdin = sys.stdin.buffer if sys.stdin is not None else io.BytesIO()
    stdout = sys.stdout.buffer if sys.stdout is not None else open(os.devnull, "wb")  # noqa: SIM115
    code = main(sys.argv[1:], os.environ, stdin, stdout, sys.stderr)
    try:
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        # Broken: what is left in the buffer goes nowhere rather than to a shutdown warning.
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    sys.exit(code)
