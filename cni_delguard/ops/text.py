"""Text from the node (log lines, file names, markers) made safe for a terminal, and `--json`
output that a machine can read.

Anything in the decision log or a state dir may hold bytes an attacker chose (a container ID is
validated, but a log or a file name planted by hand is not): control characters, escape
sequences, bidi overrides. They are shown escaped, never written raw.
"""

from __future__ import annotations

import json
import shlex


def clean(value: object) -> str:
    """`value` as one printable line: non-printable characters as \\x.., \\u.. escapes."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(c: str) -> str:
    code = ord(c)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def age(seconds: float | None) -> str:
    """A short age for a table: 45s, 12m, 3h, 2d."""
    if seconds is None:
        return "?"
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def as_json(value: object) -> str:
    """The one `--json` output: strict JSON (RFC 8259), indented, one trailing newline. NaN and
    Infinity, which Python's json prints by default and jq and Go refuse, raise ValueError
    instead: every number reaching here was validated where it was read (store.epoch,
    logread.error_code), and a test feeds each tool NaN, 1e999 and 400-digit integers."""
    return json.dumps(value, indent=2, allow_nan=False) + "\n"


def command(subcommand: str, root: str, *argv: str) -> str:
    """A command line the operator can paste where the tool that prints it was run, quoted for
    a POSIX shell: `cni-delguard SUBCOMMAND [--root ROOT] ARGV...`. `--root` is given when the
    tool was (in the watcher's pod, `--root /host`: the node's / is there, and the image has
    `cni-delguard` on its PATH), so the command works where the page said to run the tool."""
    args = ["cni-delguard", subcommand]
    if root not in ("", "/"):
        args += ["--root", root]
    return shlex.join([*args, *argv])
