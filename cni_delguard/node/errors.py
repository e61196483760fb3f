"""The installer's one error base, and the exit code of each kind of refusal.

Every refusal is one line on stderr saying what to do, and its own exit code, so a script or a
container's status tells the kinds apart without parsing the message:

| code | class | meaning |
| --- | --- | --- |
| 1 | `InstallerError` / OSError | an I/O failure the installer did not expect |
| 2 | (usage) | bad command line |
| 3 | `ConfRefusedError` | the conf cannot be patched (or restored) safely; nothing was changed |
| 4 | `NoConfError` | no conf dir or no conf file (after `--wait`) |
| 5 | `BundleRefusedError` | the guard's bundle is missing, incomplete or does not run |
| 6 | `LockTimeoutError` | another installer held the node's installer lock too long |
| 7 | `WrapUnknownError` | no multus found in the conf and no `--wrap TYPE` given |
"""

from __future__ import annotations


class InstallerError(Exception):
    """A node the installer will not change, with the reason and what to do in the message."""

    code = 1


class ConfRefusedError(InstallerError):
    code = 3


class NoConfError(InstallerError):
    code = 4


class BundleRefusedError(InstallerError):
    code = 5


class LockTimeoutError(InstallerError):
    code = 6


class WrapUnknownError(InstallerError):
    code = 7
