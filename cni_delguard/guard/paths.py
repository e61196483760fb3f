"""Where a config may point the guard: the path rule (docs/configuration.md#the-path-rule; the
threat it answers: docs/RELIABILITY.md).

Who writes a guard config is not only the node's admin: in a multus cluster anyone who may create
a NetworkAttachmentDefinition can write one of type cni-delguard, and the guard runs as root. So
the two paths it writes to must stay under allowed prefixes: `stateDir` (where it creates
directories and small files) and `logFile` (which it creates and appends to; a log line can carry
a delegate's error text, so a log file where a shell or a loader reads files, such as
/etc/profile.d or /root, could run code). The cache dirs are only ever lstat()ed.

The built-in prefixes hold nothing that runs or configures anything: /var/lib and /run (state
only: the guard makes just directories and its own `.json`/`.lock` files below `stateDir`) and
/var/log (logs only). The temp dirs are not among them: any local user can make names there. The
node's admin widens them with `cni-delguard.paths` beside the plugin in a CNI_PATH directory
(root's, like the plugin itself): lines `state <dir>` or `log <dir>`, `#` comments (the demo, the
benchmarks and the tests widen them to their temp dirs so). It is read only when a path falls
outside the built-in prefixes, or names a dir that does not exist yet, so the DEL skip path with
default paths does not pay for it.

Creating is narrower than writing (`creatable`): a dir's mere existence changes what other
programs do (a /run/nologin dir makes pam_nologin refuse every login but root's; a
/var/log/journal dir makes journald keep its journal on disk). So the guard never creates a
missing dir a config named under the built-in prefixes: only its own defaults (the state dir,
the log's dir), and a config's dir only as one new leaf inside an existing dir under a prefix
the admin named. A path is also bounded (MAX_PATH_BYTES, MAX_DEPTH): the walk opens each
component, and a config of 4 MiB could otherwise name two million of them.

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
# A state dir is followed by networks/<network of up to 255 bytes>/<key of up to 200>.json and a
# temp decoration: 1024 bytes keeps every file the guard makes well under PATH_MAX (4096).
MAX_PATH_BYTES = 1024
# The guard's own paths have 4 components (/var/log/cni-delguard/delguard.log); an admin's
# place a few more.
MAX_DEPTH = 32


def refusal(kind: str, path: str, cni_path: str) -> str | None:
    """Why `path` (absolute, normalized) may not be used as `kind` ("state" or "log"); None
    when it may."""
    bound = _too_big(path)
    if bound is not None:
        return bound
    if _under(path, _KINDS[kind]):
        return None
    if _under(path, widened(cni_path).get(kind, ())):
        return None
    allowed = ", ".join(_KINDS[kind])
    return f"{path} is outside the allowed places for {kind} ({allowed}; {SETTINGS_FILE} widens)"


def _too_big(path: str) -> str | None:
    size = len(path.encode("utf-8", "surrogateescape"))
    if size > MAX_PATH_BYTES:
        return f"a path of {size} bytes (at most {MAX_PATH_BYTES})"
    depth = path.count("/")
    if depth > MAX_DEPTH:
        return f"a path of {depth} components (at most {MAX_DEPTH})"
    return None


def creatable(kind: str, path: str, cni_path: str, builtin: str) -> bool:
    """Whether the guard may create the dir `path` (absolute, normalized, missing) for `kind`:
    when it is `builtin` (the guard's own default dir), or a leaf whose parent lies under a
    prefix the admin named for `kind` (the parent itself must exist: the caller's walk creates
    the leaf only). Never for a dir under the built-in prefixes alone."""
    if path == builtin:
        return True
    parent = os.path.dirname(path).rstrip("/") + "/"
    return any(parent.startswith(p) for p in widened(cni_path).get(kind, ()))


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
