"""doctor's checks of the guard's state dir: is it the guard's alone, which network dirs every
tool skips (the one rule, store.network_dirs), ADDs that died, and lock files held or orphaned
(removable with --repair, under their flock)."""

from __future__ import annotations

import functools
import os

from cni_delguard.cni import errors
from cni_delguard.cni.skel import valid_network
from cni_delguard.ops import scan
from cni_delguard.ops.doctor.node import INFO, OK, PROBLEM, Finding, Node
from cni_delguard.ops.text import age
from cni_delguard.state import fsutil, store
from cni_delguard.state.marker import ATTEMPTED, CORRUPT


def check_state_dir(node: Node) -> list[Finding]:
    """Is the state dir (and its `networks`) ours alone: owner, mode, not a symlink?"""
    try:
        root = fsutil.open_dir(node.state_dir)
    except FileNotFoundError:
        return [
            Finding(
                "state",
                INFO,
                f"{node.state_dir} does not exist yet (the first ADD through the guard creates it)",
                node.state_dir,
            )
        ]
    except (OSError, errors.CniError) as exc:
        return [_unusable(node.state_dir, exc)]
    networks = os.path.join(node.state_dir, store.NETWORKS)
    try:
        os.close(fsutil.open_subdir(root, store.NETWORKS, networks, create=False))
    except FileNotFoundError:
        pass  # made by the first ADD
    except (OSError, errors.CniError) as exc:
        return [_unusable(networks, exc)]
    finally:
        os.close(root)
    return [Finding("state", OK, f"{node.state_dir} is safe (owned by us, not writable by others)")]


def _unusable(path: str, exc: OSError | errors.CniError) -> Finding:
    why = exc.msg if isinstance(exc, errors.CniError) else f"{path}: {exc.strerror or exc}"
    return Finding("state", PROBLEM, f"{why}: every ADD fails until it is fixed", path)


def check_network_dirs(node: Node) -> list[Finding]:
    """The entries of `networks` that every tool and GC skip, and why: a network's dir that is
    a symlink, not a directory, not ours or writable by others (its ADDs fail with code 5 until
    it is fixed), or a name the guard never writes."""
    try:
        skipped = scan.skipped(node.state_dir)
    except (OSError, errors.CniError):
        return []  # check_state_dir says why
    found = []
    for path, why in skipped:
        name = os.path.basename(path)
        if valid_network(name):
            message = (
                f"network dir {name}: {why}; list, release, GC and metrics skip it, and every "
                "ADD of that network fails until it is fixed"
            )
            found.append(Finding("networks", PROBLEM, message, path))
        else:
            message = f"{name!r} in {store.NETWORKS}: {why}; skipped by every tool"
            found.append(Finding("networks", INFO, message, path))
    return found


def check_markers(node: Node) -> list[Finding]:
    """Markers `attempted` for longer than the ADD timeout (an ADD that died), unreadable ones."""
    found = []
    for m in markers(node):
        where = f"{m.network} {m.container_id or m.key} {m.ifname}".rstrip()
        pod = f" (pod {m.pod_name()})" if m.pod_name() else ""
        marker_age = m.age(node.now)
        if m.state == ATTEMPTED and marker_age is not None and marker_age > node.add_timeout:
            found.append(
                Finding(
                    "markers",
                    PROBLEM,
                    f"{where}{pod}: ADD attempted "
                    f"{age(marker_age)} ago and never completed (an ADD that died); "
                    "the guard forwards its DEL and ignores a failure",
                    m.path,
                )
            )
        elif m.state == CORRUPT:
            found.append(
                Finding(
                    "markers",
                    PROBLEM,
                    f"{where}{pod}: marker unreadable; the "
                    "guard forwards its DEL and ignores a failure",
                    m.path,
                )
            )
    return found


def markers(node: Node) -> list[scan.Marker]:
    """The markers the shared rule reads; none when the state dir cannot be read."""
    try:
        return scan.markers(node.state_dir)
    except (OSError, errors.CniError):
        return []  # check_state_dir reports why


def check_locks(node: Node) -> list[Finding]:
    """Lock files held now, or left with no marker and no holder (orphaned: removable)."""
    try:
        locks = scan.lock_files(node.state_dir)
    except (OSError, errors.CniError):
        return []
    found = []
    for lock in locks:
        held = scan.lock_held(lock.path)
        if held:
            found.append(
                Finding(
                    "locks",
                    INFO,
                    f"{lock.network} {lock.key}: held by an operation "
                    f"running now (since {age(node.now - lock.mtime)} at most)",
                    lock.path,
                )
            )
        elif held is False and not lock.has_marker:
            found.append(
                Finding(
                    "locks",
                    PROBLEM,
                    f"{lock.network} {lock.key}: orphaned lock file (no marker, no holder)",
                    lock.path,
                    repair=functools.partial(scan.remove_orphaned_lock, lock),
                )
            )
    return found
