"""install and uninstall: the order of the steps, and the dry-run diff.

Every change happens under the node's installer lock (hostlock.py), so installers in different
containers never interleave.

install:   (clear the uninstall record), put the bundle in the bin dir and verify it complete,
           then read and patch the conf in memory, validate it with the guard's own model
           (refusals happen here, before anything changes), check that the plugin the conf will
           name is complete and runs, record the original and swap the conf in, unless it
           changed since it was read: then it is read and patched again (compare before swap).
           The binary lands before the conf that names it.
uninstall: write the uninstall record (every installer, a running watcher included, stops
           wrapping), restore every conf the guard is in (the recorded original, byte for byte,
           when the file is still what the installer wrote; otherwise the delegate put back in
           place), and only then remove the binary, unless some conf still names the guard.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from cni_delguard.guard import defaults
from cni_delguard.node import bundle, confdir, hostlock, patch, record, runs
from cni_delguard.node.errors import BundleRefusedError, ConfRefusedError, InstallerError
from cni_delguard.state import fsutil

Say = Callable[[str], None]
_SWAP_ATTEMPTS = 5  # a conf rewritten this many times in a row while we patch it: give up, retry


class InstallError(ConfRefusedError):
    """A conf install or uninstall will not change; its message is the one line on stderr."""


@dataclass(frozen=True)
class Options:
    root: str  # where the node's / is: the plugin is run with it as / (runs.answers_version)
    bin_dir: str
    conf_dir: str
    conf_file: str | None
    wrap: str | None  # None: detect multus (thin or thick) in the conf
    state_dir: str
    bundle_dir: str | None = None
    keys: dict[str, Any] = field(default_factory=dict)  # guard keys written into the conf
    dry_run: bool = False
    lock_timeout: float = hostlock.DEFAULT_TIMEOUT
    layout: str = "standard"  # the node's layout (layouts.py), as chosen or found
    source: str = "layout table"  # where bin_dir and conf_dir came from (layouts.runtime_dirs)
    log_file: str = defaults.LOG_FILE  # the layout's logFile (what the guard logs to unless set)
    notes: tuple[str, ...] = ()  # where some of `keys` came from, said once the install is done


@dataclass(frozen=True)
class Change:
    path: str
    old: fsutil.FileInfo
    new: bytes
    conf: dict[str, Any]
    wrap: str
    how: str  # "found multus thick (multus-shim) in 00-multus.conflist", or "as --wrap says"


def wrap_type(opts: Options, path: str, conf: dict[str, Any]) -> tuple[str, str]:
    """The type to wrap and how it was chosen: `--wrap`, or multus detected in the conf."""
    if opts.wrap is not None:
        return opts.wrap, "as --wrap says"
    found, what = confdir.detect(path, conf)
    return found, f"found {what}"


def plan_patch(opts: Options) -> tuple[str, Change | None]:
    """The conf's path and its patched version, validated; None when it already is wrapped."""
    path = os.path.abspath(confdir.pick(opts.conf_dir, opts.conf_file))
    info = confdir.read(path)
    conf = confdir.parse(path, info.data)
    wrap, how = wrap_type(opts, path, conf)
    if wrap not in confdir.MULTUS_TYPES and confdir.multus_master(opts.conf_dir) == (
        os.path.basename(path)
    ):
        raise InstallError(
            f"cannot patch {path}: multus reads it as its master network, so the guard would "
            f"end up inside multus; wrap multus itself (--wrap multus or multus-shim)"
        )
    try:
        new = patch.wrap(conf, confdir.is_list(path), wrap, opts.keys)
    except patch.PatchError as exc:
        raise InstallError(f"cannot patch {path}: {exc}") from None
    validate(path, new, opts.bin_dir)
    if new == conf:
        return path, None
    return path, Change(path, info, confdir.render(new), conf, wrap, how)


def validate(path: str, conf: dict[str, Any], bin_dir: str) -> None:
    """Every guard entry must pass the guard's own model and its path rule (with the widening
    an admin put in the bin dir), or the runtime would get code 7 for every ADD."""
    from cni_delguard.cni.errors import CniError
    from cni_delguard.guard.config import validate_plugin_conf

    network, version = conf.get("name"), conf.get("cniVersion")
    if not isinstance(network, str) or not isinstance(version, str):
        raise InstallError(f"cannot patch {path}: it has no string 'name' and 'cniVersion'")
    for entry in patch.guard_plugins(conf, confdir.is_list(path)):
        try:
            validate_plugin_conf(entry, network, version, cni_path=bin_dir)
        except CniError as exc:
            why = f"{exc.msg}: {exc.details}" if exc.details else exc.msg
            raise InstallError(f"patched {path} would be invalid: {why}") from None


def install(opts: Options, out: TextIO, say: Say, *, watcher: bool = False) -> bool:
    """Install the bundle (if a bundle dir is given), wrap the conf; True if anything changed.
    A person's or a new pod's install lifts an uninstall; the watcher's re-wraps honour it."""
    if opts.dry_run:
        return _dry_run(opts, out, say)
    with hostlock.held(opts.state_dir, opts.lock_timeout):
        if watcher and (stamp := record.uninstalled(opts.state_dir)):
            say(f"not wrapping: uninstalled at {stamp}, until a new install")
            return False
        if not watcher and record.clear_uninstalled(opts.state_dir):
            say("a new install: lifted the uninstall record")
        plan_patch(opts)  # a conf that cannot be patched is refused before anything changes
        changed = install_bundle(opts, say) if opts.bundle_dir is not None else False
        return wrap_conf(opts, say) or changed


def _dry_run(opts: Options, out: TextIO, say: Say) -> bool:
    if opts.bundle_dir is not None:
        install_bundle(opts, say)
    path, change = plan_patch(opts)
    if change is None:
        say(f"{path}: already wrapped, unchanged")
        return False
    out.write(diff(change.path, change.old.data, change.new))
    return True


def wrap_conf(opts: Options, say: Say) -> bool:
    """Patch the conf the runtime uses; the caller holds the lock."""
    for _ in range(_SWAP_ATTEMPTS):
        path, change = plan_patch(opts)
        if change is None:
            say(f"{path}: already wrapped, unchanged")
            return False
        if problem := bundle.usable(opts.bin_dir, opts.root):
            hint = "" if opts.bundle_dir else (
                "; install the bundle first (`cni-delguard install` without --no-bundle)"
            )
            raise BundleRefusedError(f"not wrapping {path}: {problem}{hint}")
        _record_for(opts.state_dir, change)
        old = change.old
        if swap(change.path, old.data, change.new, old.mode, (old.uid, old.gid)):
            say(f"{change.path}: wrapped {change.wrap!r} in {patch.GUARD} ({change.how})")
            return True
        say(f"{change.path} changed while it was being patched; reading it again")
    raise InstallError(f"{opts.conf_dir}: the conf kept changing while it was patched; try again")


def swap(path: str, old: bytes, new: bytes, mode: int, owner: tuple[int, int]) -> bool:
    """Replace `path` with `new` only if it still holds `old` (checked just before the rename);
    False if another writer changed it since it was read: the caller reads it again."""

    def changed() -> bool:
        try:
            return confdir.read(path).data != old
        except (confdir.ConfError, confdir.NoConfError):
            return True

    return fsutil.write_file(path, new, mode, owner, unless=changed)


def install_bundle(opts: Options, say: Say) -> bool:
    assert opts.bundle_dir is not None  # noqa: S101 - the caller checked
    p = bundle.plan(opts.bundle_dir, opts.bin_dir)
    if p.up_to_date:
        say(f"{opts.bin_dir}/{bundle.LINK_NAME}: up to date ({p.version_name})")
        return False
    if opts.dry_run:
        say(
            f"would install {opts.bundle_dir} as {opts.bin_dir}/{p.version_name} "
            f"and point {bundle.LINK_NAME} at it"
        )
        return True
    bundle.apply(p, opts.root)
    say(f"{opts.bin_dir}/{bundle.LINK_NAME} -> {p.target} ({p.arch or 'arch unknown'}, "
        "verified complete, runs on the node)")
    return True


def repair(opts: Options, say: Say, expected: bundle.Entries | None = None) -> bool:
    """The watcher found the plugin broken: put the bundle back, or, with no bundle to install,
    take the guard out of the conf: never leave a conf naming a plugin that is not there.
    `expected`: the image's manifest, what the installed version must be."""
    with hostlock.held(opts.state_dir, opts.lock_timeout):
        if record.uninstalled(opts.state_dir):
            return False
        problem = bundle.check(opts.bin_dir, deep=expected is not None, expected=expected)
        if not problem:
            return False  # repaired by another installer meanwhile
        say(f"the guard's plugin is broken: {problem}")
        if opts.bundle_dir is not None:
            try:
                install_bundle(dataclasses.replace(opts, dry_run=False), say)
            except (InstallerError, OSError) as exc:
                # The bin dir cannot take the bundle (read-only, full, a new release dir the
                # pod cannot write): the conf must not keep naming a plugin that is not there.
                say(f"cannot install into {opts.bin_dir}: {exc}; unwrapping")
                try:
                    _unwrap_all(opts, say)
                except (InstallerError, OSError) as also:
                    say(f"cannot unwrap either: {also}")
                raise
            return True
        return _unwrap_all(opts, say)


def unwrap_unrunnable(opts: Options, say: Say) -> bool:
    """The watcher found that the plugin no longer runs on the node (a preload appeared, the
    node's userland changed): take the guard out of every conf, as install refuses to wrap one
    then, keeping the node's own conf (the recorded original, byte for byte). True if a conf
    changed. The watcher wraps again once the plugin runs."""
    with hostlock.held(opts.state_dir, opts.lock_timeout):
        if record.uninstalled(opts.state_dir):
            return False
        if problem := runs.runs(opts.bin_dir, opts.root):  # again, under the lock
            say(f"the guard's plugin does not run on the node: {problem}; unwrapping")
            return _unwrap_all(opts, say)
        return False


def _unwrap_all(opts: Options, say: Say) -> bool:
    changed = False
    for name in confdir.conf_files(opts.conf_dir):
        path = os.path.abspath(os.path.join(opts.conf_dir, name))
        changed |= _restore(opts, path, None, say)
    return changed


def _record_for(state_dir: str, change: Change) -> None:
    """Keep the original: the file as found, or the one recorded when the file is ours."""
    old, new_sha = change.old, fsutil.sha256_hex(change.new)
    meta = record.Record(
        change.path, old.mode, old.uid, old.gid, fsutil.sha256_hex(old.data), new_sha
    )
    if not patch.guard_plugins(change.conf, confdir.is_list(change.path)):
        record.save(state_dir, meta, old.data)
        return
    found = record.load(state_dir, change.path)
    if found is not None and found[0].patched == meta.original:
        record.save(state_dir, dataclasses.replace(found[0], patched=new_sha), found[1])
    else:
        record.drop(state_dir, change.path)  # wrapped by someone else: nothing to restore exactly


def uninstall(opts: Options, out: TextIO, say: Say) -> bool:
    if opts.dry_run:
        return _uninstall(opts, out, say)
    with hostlock.held(opts.state_dir, opts.lock_timeout):
        record.mark_uninstalled(opts.state_dir)  # first: no watcher wraps again from here on
        return _uninstall(opts, out, say)


def _uninstall(opts: Options, out: TextIO, say: Say) -> bool:
    names = [opts.conf_file] if opts.conf_file else confdir.conf_files(opts.conf_dir)
    changed = False
    for name in names:
        path = os.path.abspath(confdir.pick(opts.conf_dir, name))
        changed |= _restore(opts, path, out, say)
    still = [n for n in confdir.conf_files(opts.conf_dir) if _uses_guard(opts, n)]
    if still and not opts.dry_run:
        say(f"keeping {opts.bin_dir}/{bundle.LINK_NAME}: still used by {', '.join(still)}")
        return changed
    if opts.dry_run:
        say(f"would remove {opts.bin_dir}/{bundle.LINK_NAME} and its versions")
        return changed
    removed = bundle.uninstall(opts.bin_dir)
    if removed:
        say(f"removed {', '.join(removed)} from {opts.bin_dir}")
    return changed or bool(removed)


def _restore(opts: Options, path: str, out: TextIO | None, say: Say) -> bool:
    for _ in range(_SWAP_ATTEMPTS):
        done = _restore_once(opts, path, out, say)
        if done is not None:
            return done
        say(f"{path} changed while it was being restored; reading it again")
    raise InstallError(f"{path} kept changing while it was restored; try again")


def _restore_once(opts: Options, path: str, out: TextIO | None, say: Say) -> bool | None:
    """True restored, False nothing to restore, None: the file changed under us."""
    info = confdir.read(path)
    found = record.load(opts.state_dir, path)
    if found is not None and fsutil.sha256_hex(info.data) == found[0].patched:
        rec, new = found
        mode, owner, how = rec.mode, (rec.uid, rec.gid), "restored the original"
    else:
        try:
            conf = confdir.parse(path, info.data)
        except confdir.ConfError:
            if opts.conf_file:
                raise
            return False  # not ours to judge: some other file in the conf dir
        try:
            unwrapped = patch.unwrap(conf, confdir.is_list(path))
        except patch.PatchError as exc:
            raise InstallError(f"cannot restore {path}: {exc}") from None
        if unwrapped is None:
            if found is not None and not opts.dry_run:
                record.drop(opts.state_dir, path)
            return False
        new, mode, owner = confdir.render(unwrapped), info.mode, (info.uid, info.gid)
        how = "put the delegate back (file changed since install: not byte-identical)"
    if opts.dry_run and out is not None:
        out.write(diff(path, info.data, new))
        return True
    if not swap(path, info.data, new, mode, owner):
        return None
    record.drop(opts.state_dir, path)
    say(f"{path}: {how}")
    return True


def _uses_guard(opts: Options, name: str) -> bool:
    path = os.path.join(opts.conf_dir, name)
    try:
        conf = confdir.parse(path, confdir.read(path).data)
    except confdir.ConfError:
        return False
    return bool(patch.guard_plugins(conf, confdir.is_list(path)))


def diff(path: str, old: bytes, new: bytes) -> str:
    lines = difflib.unified_diff(
        old.decode("utf-8", "replace").splitlines(keepends=True),
        new.decode("utf-8", "replace").splitlines(keepends=True),
        fromfile=f"a{path}",
        tofile=f"b{path}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
