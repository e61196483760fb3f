"""`cni-delguard ready`: the readiness probe of the long-running installer.

Ready (exit 0) only while the node is guarded: no uninstall is in force, the conf the runtime
uses names the guard, the bin dir's cni-delguard is a complete version (its manifest, by kind and
size) and it answers CNI VERSION. Anything else is one line on stdout (the kubelet keeps it in the
pod's events) and its own exit code, so a probe failure says what is missing:

| code | meaning |
| --- | --- |
| 0 | guarded (or, with `--uninstalled`, the guard is off the node) |
| 10 | the conf the runtime uses is missing or does not name the guard |
| 11 | the plugin is missing or incomplete in the bin dir |
| 12 | the plugin is there but does not answer VERSION |
| 13 | an uninstall is in force (or, with `--uninstalled`, not yet complete) |
| 16 | guarded, but (`--live-file`) the watcher's metrics port is held by another process |

With `--live-file` (the monitoring overlay's probe), code 16: another process listening where the
watcher's metrics were asked for could answer 'guarded' for the node; the pod is not Ready until
the port is the watcher's.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from cni_delguard.guard import defaults
from cni_delguard.node import actions, bundle, confdir, patch, record, runs
from cni_delguard.node.errors import InstallerError

METRICS_NOT_SERVED = 16


class Status(NamedTuple):
    code: int
    line: str
    mode: str | None  # the guard's `mode` in the conf the runtime uses; None: it names no guard


def guarded(opts: actions.Options) -> tuple[int, str]:
    code, line, _ = status(opts)
    return code, line


def status(opts: actions.Options) -> Status:
    """The ready check, and the mode of the guard the conf names (for the watcher's metrics:
    an observe-mode guard is ready, and is not deciding)."""
    if stamp := record.uninstalled(opts.state_dir):
        return Status(13, f"not ready: uninstalled at {stamp}", None)
    found = _guard_in_conf(opts)
    if isinstance(found, Status):
        return found
    path, guard = found
    mode = guard.get("mode", defaults.MODE)
    mode = mode if isinstance(mode, str) else ""
    if problem := bundle.check(opts.bin_dir):
        return Status(11, f"not ready: {problem}", mode)
    if problem := runs.runs(opts.bin_dir, opts.root):
        return Status(12, f"not ready: {problem}", mode)
    return Status(0, f"ready: {path} is wrapped and {opts.bin_dir}/{bundle.LINK_NAME} runs", mode)


def _guard_in_conf(opts: actions.Options) -> tuple[str, dict[str, object]] | Status:
    """The conf the runtime uses and the guard it names, or why not (code 10)."""
    try:
        path = confdir.pick(opts.conf_dir, opts.conf_file)
        conf = confdir.parse(path, confdir.read(path).data)
    except InstallerError as exc:
        return Status(10, f"not ready: {exc}", None)
    except OSError as exc:
        # EACCES from listing the dir or reading the conf (an SELinux or AppArmor denial): the
        # conf cannot be shown to name the guard. An answer, never a crash of the probe or of
        # every refresh of the watcher's metrics.
        return Status(10, f"not ready: cannot read {exc.filename or opts.conf_dir}: "
                      f"{exc.strerror or exc}", None)
    guards = patch.guard_plugins(conf, confdir.is_list(path))
    if not guards:
        return Status(
            10, f"not ready: {path} (the conf the runtime uses) does not name {patch.GUARD}", None
        )
    return path, guards[0]


def uninstalled(opts: actions.Options) -> tuple[int, str]:
    if not record.uninstalled(opts.state_dir):
        return 13, "not ready: no uninstall has run"
    try:
        names = confdir.conf_files(opts.conf_dir)
    except InstallerError:
        names = []
    except OSError as exc:  # as in status(): an answer, never a crash
        return 10, f"not ready: cannot read {opts.conf_dir}: {exc.strerror or exc}"
    for name in names:
        path = os.path.join(opts.conf_dir, name)
        try:
            conf = confdir.parse(path, confdir.read(path).data)
        except InstallerError:
            continue
        except OSError as exc:
            return 10, f"not ready: cannot read {path}: {exc.strerror or exc}"
        if patch.guard_plugins(conf, confdir.is_list(path)):
            return 10, f"not ready: {path} still names {patch.GUARD}"
    if bundle.current_target(opts.bin_dir) is not None:
        return 11, f"not ready: {opts.bin_dir}/{bundle.LINK_NAME} is still there"
    return 0, "ready: the guard is off this node"
