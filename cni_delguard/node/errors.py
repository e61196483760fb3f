"""The installer's one error type. Every refusal is an InstallerError (or an OSError from the
file system): cli.py turns either into one line on stderr and exit code 1."""

from __future__ import annotations


class InstallerError(Exception):
    """A node the installer will not change, with the reason and what to do in the message."""
