"""doctor's checks of the caches the guard reads as evidence: multus caches with no libcni result
(sandboxes whose ADD failed or never finished, which the guard now frees) and libcni result files
that are not a libcni cache of a result (moved to `<stateDir>/quarantine` by --repair, never
deleted)."""

from __future__ import annotations

import functools
import os
import stat

from cni_delguard.cni.skel import valid_name
from cni_delguard.guard import evidence
from cni_delguard.ops.doctor.node import INFO, PROBLEM, Finding, Node
from cni_delguard.ops.doctor.state import markers
from cni_delguard.state import fsutil

QUARANTINE = "quarantine"
# libcni writes its cache in place: a file this young may be a write in progress, not torn.
SETTLE_SECONDS = 60


def check_multus_only(node: Node) -> list[Finding]:
    """multus caches with no libcni result and no marker: sandboxes whose ADD failed or never
    finished, which the guard now frees (their DEL is forwarded, a failure ignored)."""
    results = [n for d in node.result_dirs for n in _entries(d)]
    marked = {m.container_id for m in markers(node)}
    found = []
    for d in node.multus_dirs:
        for cid in _regular_files(d):
            if not valid_name(cid) or cid in marked:
                continue
            if any(f"-{cid}-" in name for name in results):
                continue
            found.append(
                Finding(
                    "multus",
                    PROBLEM,
                    f"sandbox {cid}: multus cache with no libcni "
                    "result (its ADD failed or never finished); the guard forwards "
                    "its DEL and ignores a failure, so the runtime can remove it",
                    os.path.join(d, cid),
                )
            )
    return found


def check_multus_thick_cache(node: Node) -> list[Finding]:
    """Multus thick keeps its cache where its daemon config's `cniDir` says, which the shim's
    conf does not name: when the node runs thick, libcni holds results (sandboxes exist) and no
    multus cache dir the guard reads holds an entry, the guard probably looks in the wrong
    place, and would skip a DEL whose only evidence is multus's cache."""
    delegate = (node.guard or {}).get("delegate")
    kind = delegate.get("type") if isinstance(delegate, dict) else (node.conf or {}).get("type")
    if kind != "multus-shim":
        return []
    if not any(_entries(d) for d in node.result_dirs):
        return []
    if any(_entries(d) for d in node.multus_dirs):
        return []
    dirs = ", ".join(node.multus_dirs)
    return [Finding(
        "multus", INFO,
        f"warning: the node runs multus thick and libcni holds results, but no multus cache "
        f"dir the guard reads ({dirs}) holds an entry: if multus's daemon config sets another "
        "cniDir, reinstall with --multus-cache-dir DIR (a DEL whose only evidence is that "
        "cache would be skipped)",
    )]


def check_result_caches(node: Node) -> list[Finding]:
    """libcni result files that are empty or not a libcni cache of a result."""
    found = []
    for d in node.result_dirs:
        for name in _entries(d):
            path = os.path.join(d, name)
            try:
                st = os.lstat(path)
                data = fsutil.read_at(None, path, evidence.MAX_RESULT_CACHE)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) or evidence.is_libcni_result(data or b""):
                continue
            why = "empty" if data == b"" else "a symlink" if data is None else "not a libcni result"
            settled = node.now - st.st_mtime >= SETTLE_SECONDS
            found.append(
                Finding(
                    "libcni",
                    PROBLEM,
                    f"{name}: libcni cache {why}; the guard treats its ADD as at "
                    "most attempted (DEL forwarded, a failure ignored)",
                    path,
                    repair=functools.partial(quarantine, node, d, name) if settled else None,
                )
            )
    return found


def quarantine(node: Node, directory: str, name: str) -> str:
    """Move an invalid libcni cache into <stateDir>/quarantine (same file system: a rename)."""
    root = fsutil.open_dir(node.state_dir, create=True)
    try:
        qdir = os.path.join(node.state_dir, QUARANTINE)
        qfd = fsutil.open_subdir(root, QUARANTINE, qdir, create=True)
    finally:
        os.close(root)
    try:
        src = os.path.join(directory, name)
        target = f"{name}.{int(node.now)}"
        n = 0
        while os.path.lexists(os.path.join(qdir, target)):
            n += 1
            target = f"{name}.{int(node.now)}.{n}"
        os.rename(src, target, dst_dir_fd=qfd)
    except OSError as exc:
        return f"left in place: {exc.strerror or exc}"
    finally:
        os.close(qfd)
    return f"moved to {os.path.join(qdir, target)}"


def _entries(d: str) -> list[str]:
    try:
        return sorted(os.listdir(d))
    except OSError:
        return []


def _regular_files(d: str) -> list[str]:
    return [
        n
        for n in _entries(d)
        if os.path.isfile(os.path.join(d, n)) and not os.path.islink(os.path.join(d, n))
    ]
