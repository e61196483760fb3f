"""The process boundary: the only place that prints a CNI error and chooses the exit code.

`main` takes argv, the environment and the three streams, so tests drive it with a dict and byte
buffers. With CNI_COMMAND set it is a CNI plugin (argv is ignored, as runtimes pass none); without
it, it is a tool for people: `stats`, `install`, `uninstall`, `--version`.
"""

from __future__ import annotations

import os
import sys

from cni_delguard import CURRENT_VERSION, __version__, errors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import BinaryIO, TextIO

    from cni_delguard.skel import Invocation

USAGE = """\
cni-delguard {version}: a CNI meta-plugin; the runtime runs it with CNI_COMMAND set.

usage: cni-delguard stats [--log-file FILE] [--last N]
       cni-delguard install|uninstall [options]   (see: cni-delguard install --help)
       cni-delguard --version
"""


def main(
    argv: list[str], environ: Mapping[str, str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO
) -> int:
    if "CNI_COMMAND" in environ or not argv:
        return plugin_main(environ, stdin, stdout)
    return tool_main(argv, stdout, stderr)


def plugin_main(environ: Mapping[str, str], stdin: BinaryIO, stdout: BinaryIO) -> int:
    version = CURRENT_VERSION
    try:
        from cni_delguard import skel

        inv = skel.parse_env(environ)
        if inv.command == "VERSION":
            from cni_delguard.plugin import cmd_version

            out = cmd_version()
        else:
            data = _read(stdin, inv.command)
            version = _version_of(data) or version
            out = _dispatch(inv, data, environ)
    except errors.CniError as exc:
        err = exc
    except OSError as exc:  # a file or process operation no narrower handler expected
        err = errors.CniError(errors.IO_FAILURE, "I/O failure in cni-delguard", str(exc)[:500])
    except Exception as exc:  # noqa: BLE001 - the runtime must get CNI JSON, never a traceback
        err = errors.CniError(errors.INTERNAL, "internal error in cni-delguard", repr(exc)[:500])
    else:
        stdout.write(out)
        stdout.flush()
        return 0
    stdout.write(err.to_json(version))
    stdout.flush()
    return err.exit_code()


def _read(stdin: BinaryIO, command: str) -> bytes:
    """Bounded stdin. An oversized config is garbage like any other: for DEL it only means
    there is no config to read (evidence decides), so DEL gets empty bytes instead of an error."""
    from cni_delguard import skel

    try:
        return skel.read_stdin(stdin)
    except errors.CniError:
        if command != "DEL":
            raise
        return b""


def _dispatch(inv: Invocation, data: bytes, environ: Mapping[str, str]) -> bytes:
    from cni_delguard import plugin

    ctx = plugin.Context(inv, environ)
    command = inv.command
    if command == "DEL":
        return plugin.cmd_del(ctx, data)
    if command == "ADD":
        return plugin.cmd_add(ctx, data)
    return plugin.cmd_forward(ctx, data)


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


def tool_main(argv: list[str], stdout: BinaryIO, stderr: TextIO) -> int:
    name = argv[0]
    if name in ("--version", "version"):
        stdout.write(f"cni-delguard {__version__}\n".encode())
        return 0
    if name == "stats":
        from cni_delguard import stats

        return stats.main(argv[1:], stdout, stderr)
    if name in ("install", "uninstall"):
        from cni_delguard.installer.cli import main as installer_main

        return installer_main(argv)
    stderr.write(USAGE.format(version=__version__))
    return 0 if name in ("-h", "--help", "help") else 2


def run() -> None:
    """Console-script, `python -m` and frozen-binary entry point."""
    code = main(sys.argv[1:], os.environ, sys.stdin.buffer, sys.stdout.buffer, sys.stderr)
    sys.stdout.flush()
    sys.exit(code)
