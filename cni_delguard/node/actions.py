"""install and uninstall: the order of the steps, and the dry-run diff.

install:   read and patch the conf in memory, validate it with the guard's own model (refusals
           happen here, before anything changes), copy the bundle in, record the original, write
           the conf. The binary lands before the conf that names it.
uninstall: restore every conf the guard is in (the recorded original, byte for byte, when the file
           is still what the installer wrote; otherwise the delegate put back in place), and only
           then remove the binary, unless some conf still names the guard.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from cni_delguard.node import bundle, confdir, patch, record
from cni_delguard.node.errors import InstallerError
from cni_delguard.state import fsutil

Say = Callable[[str], None]


class InstallError(InstallerError):
    """Anything that stops install or uninstall; its message is the one line on stderr."""


@dataclass(frozen=True)
class Options:
    bin_dir: str
    conf_dir: str
    conf_file: str | None
    wrap: str
    state_dir: str
    bundle_dir: str | None = None
    keys: dict[str, Any] = field(default_factory=dict)  # guard keys written into the conf
    dry_run: bool = False


@dataclass(frozen=True)
class Change:
    path: str
    old: fsutil.FileInfo
    new: bytes
    conf: dict[str, Any]


def plan_patch(opts: Options) -> Change | None:
    """The patched conf, validated; None when the conf already is as it should be."""
    path = os.path.abspath(confdir.pick(opts.conf_dir, opts.conf_file))
    if opts.wrap not in confdir.MULTUS_TYPES and confdir.multus_master(opts.conf_dir) == (
        os.path.basename(path)
    ):
        raise InstallError(
            f"cannot patch {path}: multus reads it as its master network, so the guard would "
            f"end up inside multus; wrap multus itself (--wrap multus or multus-shim)"
        )
    info = confdir.read(path)
    conf = confdir.parse(path, info.data)
    try:
        new = patch.wrap(conf, confdir.is_list(path), opts.wrap, opts.keys)
    except patch.PatchError as exc:
        raise InstallError(f"cannot patch {path}: {exc}") from None
    validate(path, new)
    if new == conf:
        return None
    return Change(path, info, confdir.render(new), conf)


def validate(path: str, conf: dict[str, Any]) -> None:
    """Every guard entry must pass the guard's own model, or the runtime would get code 7."""
    from cni_delguard.cni.errors import CniError
    from cni_delguard.guard.config import validate_plugin_conf

    network, version = conf.get("name"), conf.get("cniVersion")
    if not isinstance(network, str) or not isinstance(version, str):
        raise InstallError(f"cannot patch {path}: it has no string 'name' and 'cniVersion'")
    for entry in patch.guard_plugins(conf, confdir.is_list(path)):
        try:
            validate_plugin_conf(entry, network, version)
        except CniError as exc:
            raise InstallError(f"patched {path} would be invalid: {exc.msg}") from None


def install(opts: Options, out: TextIO, say: Say) -> bool:
    """Install the bundle (if a bundle dir is given), patch the conf; True if anything changed."""
    change = plan_patch(opts)
    changed = False
    if opts.bundle_dir is not None:
        changed = install_bundle(opts, say)
    if change is None:
        path = confdir.pick(opts.conf_dir, opts.conf_file)
        say(f"{path}: already wraps {opts.wrap!r}, unchanged")
        return changed
    if opts.dry_run:
        out.write(diff(change.path, change.old.data, change.new))
        return True
    _record_for(opts.state_dir, change)
    fsutil.write_file(change.path, change.new, change.old.mode, (change.old.uid, change.old.gid))
    say(f"{change.path}: wrapped {opts.wrap!r} in {patch.GUARD}")
    return True


def install_bundle(opts: Options, say: Say) -> bool:
    assert opts.bundle_dir is not None  # noqa: S101 - the caller checked
    try:
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
        bundle.apply(p)
    except bundle.BundleError as exc:
        raise InstallError(str(exc)) from None
    say(f"{opts.bin_dir}/{bundle.LINK_NAME} -> {p.target}")
    return True


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


def _restore(opts: Options, path: str, out: TextIO, say: Say) -> bool:
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
    if opts.dry_run:
        out.write(diff(path, info.data, new))
        return True
    fsutil.write_file(path, new, mode, owner)
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
