"""The one-folder bundle into the CNI bin dir: verified complete, then switched atomically.

Layout in the bin dir:

    cni-delguard -> .cni-delguard-<digest>/cni-delguard    (relative symlink, what runtimes exec)
    .cni-delguard-<digest>/                                 (a complete copy of the bundle)
    .cni-delguard-<digest>/.delguard-manifest.json  (each entry: kind, exec bit, size, sha256;
                                                     and the bundle's arch, from its build info)
    .cni-delguard-<digest>-2/                       (the same version's second slot: a repair)

A new version is copied into `.cni-delguard-<digest>.<pid>-<random>.tmp/` (unique across PID
namespaces: two installers in two containers are both PID 1), every file and directory fsynced,
its manifest written, the copy verified against the source's manifest, and the directory renamed
to its final name: it appears complete or not at all. Only then is the `cni-delguard` symlink
replaced (a new symlink renamed over it). The caller holds the node's installer lock
(hostlock.py), so no other installer copies or prunes at the same time. A frozen one-folder
executable keeps loading files from its folder after exec (libpython, extension modules), so the
version just replaced is kept until the next upgrade: a plugin started from it a moment before the
switch can still finish. Older versions are removed.

A repair never empties the live dir: each version has two slots, `<digest>` and `<digest>-2`.
When the copy the link points at is damaged (a changed byte, a stray or missing file), the
version is copied into the other slot, the link switched to it, and the damaged copy is then kept
as the replaced version (and removed by the next switch, as any replaced version is): an exec
that resolved the link a moment before the switch is still loading files from it. Removing the
damaged dir and copying it again under the same name would leave the link pointing at nothing
for the length of the copy: measured, 183 of 400 VERSION execs run alongside such a repair
failed (ENOENT). So every switch (install, repair, upgrade, rollback) leaves a complete version
behind the link at every instant; only uninstall removes it
(tests/installer/test_frozen_bundle_lifecycle.py counts the failures).

`check` is what the watcher and the readiness probe ask every poll: the link, the version dir and
its manifest, by kind and size (a stat per file, about 1 ms for the frozen bundle); `deep` adds
every file's sha256 (about 0.1 s), asked once before every (re-)wrap and every switch.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass
from typing import Any

from cni_delguard.node import fsops
from cni_delguard.node import runs as plugin_runs
from cni_delguard.node.errors import BundleRefusedError
from cni_delguard.state import fsutil

LINK_NAME = "cni-delguard"
PREFIX = ".cni-delguard-"
MANIFEST = ".delguard-manifest.json"
_MAX_MANIFEST = 4 * 1024 * 1024
Entries = dict[str, list[Any]]


class BundleError(BundleRefusedError):
    """The bundle cannot be installed or used (missing, incomplete, not executable, or unsafe)."""


SECOND_SLOT = "-2"


@dataclass(frozen=True)
class Plan:
    bin_dir: str
    bundle_dir: str
    digest: str
    entries: Entries
    current: str | None  # what the link points to now (None: no link)
    arch: str | None = None  # from the bundle's build info (None: a bundle without one)
    version_name: str = ""  # the slot this version goes to (choose_slot); set by plan()
    slot_intact: bool = False  # that slot holds this version, complete (sha256 of every file)

    @property
    def target(self) -> str:
        return f"{self.version_name}/{LINK_NAME}"

    @property
    def up_to_date(self) -> bool:
        return self.current == self.target and self.slot_intact


def manifest(top: str, deep: bool = True) -> Entries:
    """Every entry of a tree: `f` exec-bit size sha256 (None unless deep), `l` target, `d`."""
    entries: Entries = {}
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, top)
        if rel_dir != ".":
            entries[os.path.normpath(rel_dir)] = ["d"]
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(_j(dirpath, d))]):
            rel = os.path.normpath(_j(rel_dir, name))
            if rel == MANIFEST:
                continue
            path = _j(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                entries[rel] = ["l", os.readlink(path)]
            elif stat.S_ISREG(st.st_mode):
                sha = _file_sha(path) if deep else None
                entries[rel] = ["f", int(bool(st.st_mode & 0o111)), st.st_size, sha]
            else:
                raise BundleError(f"bundle entry {rel} is neither a file, a dir nor a symlink")
    return entries


def digest_of(entries: Entries) -> str:
    return fsutil.sha256_hex(json.dumps(entries, sort_keys=True).encode())


def tree_digest(top: str) -> str:
    """sha256 over the relative paths, kinds, exec bits, sizes, contents and link targets."""
    return digest_of(manifest(top))


def verify(version_dir: str, deep: bool, expected: Entries | None = None) -> str | None:
    """None if `version_dir` holds exactly what its manifest lists, else what is wrong. With
    `expected` (the image's own entries, `image_entries`), the dir and its manifest must both be
    exactly those: a manifest in the bin dir is only as trustworthy as whoever can write there, so
    a version dir planted or changed together with its manifest is not this version."""
    try:
        raw = fsutil.read_regular(None, _j(version_dir, MANIFEST), _MAX_MANIFEST).data
        stored = json.loads(raw)["entries"]
        found = manifest(version_dir, deep)
    except FileNotFoundError:
        return f"{version_dir} or its manifest is missing"
    except (OSError, ValueError, KeyError, TypeError, BundleError) as exc:
        return f"{version_dir} is unreadable: {exc}"
    if not isinstance(stored, dict) or (expected is not None and stored != expected):
        damaged = "damaged" if expected is None else "not the image's"
        return f"{version_dir}: its manifest is {damaged}"
    if not deep:
        stored = {k: [*v[:3], None] if v and v[0] == "f" else v for k, v in stored.items()}
    missing = sorted(set(stored) - set(found))
    if missing:
        return f"{version_dir} is incomplete: {len(missing)} files missing (e.g. {missing[0]})"
    wrong = sorted(k for k in found if stored.get(k) != found[k])
    if wrong:
        return f"{version_dir} differs from its manifest: {wrong[0]}"
    return None


def check(bin_dir: str, deep: bool = False, expected: Entries | None = None) -> str | None:
    """None if the bin dir's cni-delguard is our link into a complete version, else why not;
    with `expected`, a version of exactly those entries (verify)."""
    link = _j(bin_dir, LINK_NAME)
    target = current_target(bin_dir)
    if target is None:
        return f"{link} is missing"
    version = _version_of(target)
    if version:
        return verify(_j(bin_dir, version), deep, expected)
    if os.path.isfile(link) and os.access(link, os.X_OK):
        return None  # put there by a package or by hand: `runs` is its test
    return f"{link} is neither our link into a {PREFIX}* version nor an executable"


def signature(bin_dir: str) -> tuple[object, ...]:
    """What changes when anything in the linked version is added, removed or renamed: the link's
    target and the identity and times of each of its directories (56 stats for the frozen
    bundle, against 624 for `check`). A watcher runs `check` only when this changed, and now
    and then regardless (a file rewritten in place changes no directory)."""
    target = current_target(bin_dir)
    version = _version_of(target)
    if not version:
        return (target,)
    found: list[object] = [target]
    for dirpath, _, _ in os.walk(_j(bin_dir, version)):
        try:
            st = os.lstat(dirpath)
        except OSError:
            return (target, "changing")
        found.append((dirpath, st.st_ino, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(found)


def usable(bin_dir: str, root: str = "/", expected: Entries | None = None) -> str | None:
    """The check before every wrap: our complete version (deep; with `expected`, exactly the
    image's) or any plugin there, and it runs on the node."""
    problem = check(bin_dir, deep=True, expected=expected)
    if problem and _version_of(current_target(bin_dir)):
        return problem  # ours and damaged: never trust it, even if it happens to run
    return plugin_runs.runs(bin_dir, root)


def _j(a: str, b: str) -> str:
    return os.path.join(a, b)


def _file_sha(path: str) -> str:
    h = fsutil.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1024 * 1024):
            h.update(chunk)
    return h.hexdigest()


def plan(bundle_dir: str, bin_dir: str) -> Plan:
    exe = os.path.join(bundle_dir, LINK_NAME)
    if not os.path.isfile(exe) or not os.access(exe, os.X_OK):
        raise BundleError(f"no executable {LINK_NAME} in bundle dir {bundle_dir}")
    if not os.path.isdir(bin_dir):
        raise BundleError(f"bin dir {bin_dir} does not exist")
    entries = image_entries(bundle_dir)
    digest, current = digest_of(entries), current_target(bin_dir)
    slot, intact = choose_slot(bin_dir, PREFIX + digest[:16], _version_of(current), entries)
    return Plan(bin_dir, bundle_dir, digest, entries, current, arch_of(bundle_dir), slot, intact)


def image_entries(bundle_dir: str) -> Entries:
    """The manifest of the bundle this installer carries (its image's, deep): what every
    version dir in the bin dir is compared with, never the bin dir's own manifest. A watcher
    reads it once (the image does not change under a running pod)."""
    return manifest(bundle_dir)


def choose_slot(bin_dir: str, base: str, live: str, entries: Entries) -> tuple[str, bool]:
    """Where this version goes, and whether it is there intact already: the live slot when it
    holds exactly `entries` (nothing to do), another such copy (one kept from before: a
    rollback), else the slot the link does not point at (a repair, or a first install). A slot
    whose files or manifest differ from `entries` is never adopted, whatever its name says."""
    slots = sorted((base, base + SECOND_SLOT), key=lambda s: s != live)  # the live one first
    for slot in slots:
        path = _j(bin_dir, slot)
        if os.path.isdir(path) and verify(path, deep=True, expected=entries) is None:
            return slot, True
    return (slots[1] if slots[0] == live else slots[0]), False


def arch_of(bundle_dir: str) -> str | None:
    """The arch a frozen bundle was built for (its `_internal/delguard-build.json`)."""
    from cni_delguard import buildinfo

    try:
        raw = fsutil.read_regular(None, _j(_j(bundle_dir, "_internal"), buildinfo.FILE), 65536)
        arch = json.loads(raw.data).get("arch")
    except (OSError, ValueError, AttributeError):
        return None
    return arch if isinstance(arch, str) else None


def current_target(bin_dir: str) -> str | None:
    link = os.path.join(bin_dir, LINK_NAME)
    try:
        return os.readlink(link)
    except FileNotFoundError:
        return None
    except OSError:  # EINVAL: a regular file, placed by something else
        return ""


def apply(p: Plan, root: str = "/") -> None:
    """Copy the version in (unless present and intact), check that it runs on the node (with
    `root` as /: a version that cannot run there must not replace one that can), switch the link,
    prune old versions. The caller holds the installer lock: every temp dir found is a crashed
    run's."""
    prune(p.bin_dir, {p.version_name, _version_of(p.current)}, temps_only=True)
    final = os.path.join(p.bin_dir, p.version_name)
    if os.path.lexists(final) and not p.slot_intact:
        if p.version_name == _version_of(p.current):
            raise BundleError(f"{final} is damaged and linked: plan() chooses the other slot")
        _remove_tree(final)  # incomplete or damaged, not linked: never point the link at it
    if not os.path.isdir(final):
        _copy_version(p, final)
    link = os.path.join(p.bin_dir, LINK_NAME)
    if os.path.isdir(link) and not os.path.islink(link):
        raise BundleError(f"{link} is a directory; refusing to replace it")
    if p.current != p.target:
        versions, why = plugin_runs.answers_version(os.path.join(final, LINK_NAME), root)
        if versions is None:
            _remove_tree(final)
            raise BundleError(f"not installing {p.bundle_dir}: {why}")
        fsops.symlink_atomic(p.target, link)
    prune(p.bin_dir, {p.version_name, _version_of(p.current)})


def _version_of(target: str | None) -> str:
    head = (target or "").split("/", 1)[0]
    return head if head.startswith(PREFIX) and "/" in (target or "") else ""


def _copy_version(p: Plan, final: str) -> None:
    # `.cni-delguard-<digest>.<pid>-<random>.tmp`: our prefix, so prune finds a crashed run's.
    tmp = os.path.join(p.bin_dir, fsutil.temp_name(p.version_name)[1:])
    try:
        _copy_tree(p.bundle_dir, tmp)
        body = json.dumps({"digest": p.digest, "arch": p.arch, "entries": p.entries},
                          sort_keys=True)
        fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fsutil.write_atomic(fd, MANIFEST, body.encode(), mode=0o644)
        finally:
            os.close(fd)
        _verify_copy(p, tmp)
        os.rename(tmp, final)
    except BaseException:
        _remove_tree(tmp)
        raise
    fsops.fsync_dir(os.path.dirname(final))


def _verify_copy(p: Plan, tmp: str) -> None:
    """The copy, read back, must be exactly the source's manifest before it gets its name."""
    copied = manifest(tmp)
    if copied != p.entries:
        wrong = sorted(set(copied) ^ set(p.entries)) or [
            k for k in copied if copied[k] != p.entries[k]
        ]
        raise BundleError(f"the copy of {p.bundle_dir} does not match it ({wrong[0]})")


def _copy_tree(src: str, dst: str) -> None:
    os.mkdir(dst, 0o700)  # opened up to 0755 once complete, just before the rename
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        target = os.path.join(dst, entry.name)
        if entry.is_symlink():
            link = os.readlink(entry.path)
            if os.path.isabs(link) or ".." in link.split("/"):
                raise BundleError(f"bundle symlink {entry.path} points outside the bundle")
            os.symlink(link, target)
        elif entry.is_dir():
            _copy_tree(entry.path, target)
        else:
            executable = entry.stat(follow_symlinks=False).st_mode & 0o111
            fsops.copy_file(entry.path, target, 0o755 if executable else 0o644)
    os.chmod(dst, 0o755)  # noqa: S103 - a bin dir entry: root-owned, world-readable like /opt/cni/bin
    fsops.fsync_dir(dst)


def prune(bin_dir: str, keep: set[str], temps_only: bool = False) -> list[str]:
    """Remove temp dirs left by crashed runs and (unless temps_only) our versions not in
    `keep`. Called under the installer lock, so no temp dir belongs to a live copy."""
    removed = []
    for entry in os.scandir(bin_dir):
        if not entry.name.startswith(PREFIX) or entry.name in keep:
            continue
        if temps_only and not entry.name.endswith(".tmp"):
            continue
        _remove_tree(entry.path)
        removed.append(entry.name)
    return removed


def uninstall(bin_dir: str) -> list[str]:
    """Remove the link (if it is ours) and every version dir; return what was removed."""
    removed = []
    link = os.path.join(bin_dir, LINK_NAME)
    if _version_of(current_target(bin_dir)):
        os.unlink(link)
        fsops.fsync_dir(bin_dir)
        removed.append(LINK_NAME)
    return removed + prune(bin_dir, set())


def _remove_tree(path: str) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)
