"""Where a config may point the guard: the path rule (docs/RELIABILITY.md, "Config paths").

Who writes a guard config is not only the node's admin: in a multus cluster anyone who may create
a NetworkAttachmentDefinition can write one of type cni-delguard, and the guard runs as root. So
the two paths it writes to must stay under allowed prefixes: `stateDir` (where it creates
directories and small files) and `logFile` (which it creates and appends to; a log line can carry
a delegate's error text, so a log file where a shell or a loader reads files, such as
/etc/profile.d or /root, could run code). The cache dirs are only ever lstat()ed.

The built-in prefixes hold nothing that runs or configures anything: /var/lib and /run (state
only: the guard makes just directories and its own `.json`/`.lock` files below `stateDir`) and
/var/log (logs only). The temp dirs are not among them (issue 38): any local user can make
names there. The node's admin widens them with `cni-delguard.paths` beside the plugin in a
CNI_PATH directory (root's, like the plugin itself): lines `state <dir>` or `log <dir>`, `#`
comments (the demo, the benchmarks and the tests widen them to their temp dirs so). It is read
only when a path falls outside the built-in prefixes, so the DEL skip path with default paths
does not pay for it.

A prefix is a string rule; what holds it to the disk is fsutil.walk, through which every
directory the guard writes in is opened: no component a link, each one the guard's own and not
writable by others (a sticky dir such as /tmp only above ours).
"""

from __future__ import annotations

import os

STATE_PREFIXES = ("/var/lib/", "/run/")
LOG_PREFIXES = ("/var/log/",)
SETTINGS_FILE = "cni-delguard.paths"
_KINDS = {"state": STATE_PREFIXES, "log": LOG_PREFIXES}


def refusal(kind: str, path: str, cni_path: str) -> str | None:
    """Why `path` (absolute, normalized) may not be used as `kind` ("state" or "log"); None
    when it may."""
    if _under(path, _KINDS[kind]):
        return None
    if _under(path, widened(cni_path).get(kind, ())):
        return None
    allowed = ", ".join(_KINDS[kind])
    return f"{path} is outside the allowed places for {kind} ({allowed}; {SETTINGS_FILE} widens)"


def _under(path: str, prefixes: tuple[str, ...] | list[str]) -> bool:
    return any(path.startswith(prefix) and len(path) > len(prefix) for prefix in prefixes)


def widened(cni_path: str) -> dict[str, list[str]]:
    """The admin's extra prefixes from the first CNI_PATH dir that has the settings file. A file
    that is a symlink, not a regular file, not ours, writable by others or hard-linked is
    ignored."""
    from cni_delguard.state import fsutil

    for directory in cni_path.split(os.pathsep):
        if not directory.startswith("/"):
            continue
        try:
            info = fsutil.read_regular(None, os.path.join(directory, SETTINGS_FILE))
        except OSError:
            continue
        if info.distrust() is not None:
            continue
        return parse(info.data)
    return {}


def parse(data: bytes) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for raw in data.decode("utf-8", "replace").splitlines():
        words = raw.split("#", 1)[0].split()
        if len(words) != 2 or words[0] not in _KINDS or not words[1].startswith("/"):
            continue
        prefix = os.path.normpath(words[1]).rstrip("/") + "/"
        if prefix != "/":  # "/" would undo the rule
            out.setdefault(words[0], []).append(prefix)
    return out
