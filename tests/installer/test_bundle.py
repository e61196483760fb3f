"""bundle.py: versioned copy, atomic switch, pruning, and exec during install never failing."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import time
from itertools import pairwise

import pytest

from cni_delguard.node import bundle
from tests.support.waiting import wait_for

from .conftest import make_bundle


def versions(bin_dir):
    return sorted(n for n in os.listdir(bin_dir) if n.startswith(bundle.PREFIX))


def exec_guard(bin_dir):
    return subprocess.run(
        [str(bin_dir / "cni-delguard")], capture_output=True, text=True, check=False
    )


def install(src, bin_dir):
    p = bundle.plan(str(src), str(bin_dir))
    if not p.up_to_date:
        bundle.apply(p)
    return p


def test_fresh_install_is_a_relative_link_into_a_complete_copy(tmp_path, bundles):
    p = install(bundles["v1"], tmp_path)
    assert os.readlink(tmp_path / "cni-delguard") == f"{p.version_name}/cni-delguard"
    assert bundle.tree_digest(str(tmp_path / p.version_name)) == p.digest
    assert exec_guard(tmp_path).stdout == "v1"
    assert (tmp_path / p.version_name).stat().st_mode & 0o777 == 0o755
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_second_install_of_the_same_bundle_is_up_to_date_and_touches_nothing(tmp_path, bundles):
    install(bundles["v1"], tmp_path)
    before = os.lstat(tmp_path / "cni-delguard")
    assert bundle.plan(str(bundles["v1"]), str(tmp_path)).up_to_date
    install(bundles["v1"], tmp_path)
    after = os.lstat(tmp_path / "cni-delguard")
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_upgrade_keeps_the_replaced_version_and_removes_older_ones(tmp_path, bundles):
    p1 = install(bundles["v1"], tmp_path)
    p2 = install(bundles["v2"], tmp_path)
    assert exec_guard(tmp_path).stdout == "v2"
    assert versions(tmp_path) == sorted([p1.version_name, p2.version_name])
    p3 = install(bundles["v3"], tmp_path)
    assert exec_guard(tmp_path).stdout == "v3"
    assert versions(tmp_path) == sorted([p2.version_name, p3.version_name])


def test_a_damaged_installed_version_is_replaced(tmp_path, bundles):
    p = install(bundles["v1"], tmp_path)
    (tmp_path / p.version_name / "_internal" / "version").write_text("broken")
    assert not bundle.plan(str(bundles["v1"]), str(tmp_path)).up_to_date
    install(bundles["v1"], tmp_path)
    assert exec_guard(tmp_path).stdout == "v1"


def test_uninstall_removes_link_and_versions_but_not_foreign_files(tmp_path, bundles):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    install(bundles["v1"], bin_dir)
    install(bundles["v2"], bin_dir)
    (bin_dir / "bridge").write_text("foreign")
    removed = bundle.uninstall(str(bin_dir))
    assert "cni-delguard" in removed
    assert sorted(os.listdir(bin_dir)) == ["bridge"]


def test_a_foreign_regular_file_is_replaced_atomically_but_not_removed_on_uninstall(
    tmp_path, bundles
):
    (tmp_path / "cni-delguard").write_text("someone else's")
    assert bundle.uninstall(str(tmp_path)) == []
    install(bundles["v1"], tmp_path)
    assert exec_guard(tmp_path).stdout == "v1"


@pytest.mark.parametrize(
    ("make", "why"),
    [
        pytest.param(lambda d: d.mkdir(), "no executable cni-delguard", id="empty-bundle"),
        pytest.param(
            lambda d: make_bundle(d, "v") and (d / "_internal" / "x").symlink_to("/etc"),
            "points outside the bundle",
            id="absolute-symlink",
        ),
    ],
)
def test_bad_bundles_are_refused_and_leave_nothing(tmp_path, make, why):
    src, bin_dir = tmp_path / "src", tmp_path / "bin"
    bin_dir.mkdir()
    make(src)
    with pytest.raises(bundle.BundleError, match=why):
        install(src, bin_dir)
    assert os.listdir(bin_dir) == []


def test_temp_dirs_of_crashed_runs_are_pruned(tmp_path, bundles):
    """apply runs under the installer lock: no temp dir can be a live copy, however fresh."""
    stale = tmp_path / f"{bundle.PREFIX}0123.1-aabbcc.tmp"
    stale.mkdir()
    os.utime(stale, (0, 0))
    fresh = tmp_path / f"{bundle.PREFIX}4567.1-ddeeff.tmp"
    fresh.mkdir()
    install(bundles["v1"], tmp_path)
    assert not stale.exists()
    assert not fresh.exists()


def test_an_incomplete_version_dir_is_never_linked(tmp_path, bundles):
    """What a crashed copy without the rename-when-complete would leave: files missing."""
    p = bundle.plan(str(bundles["v1"]), str(tmp_path))
    bundle.apply(p)
    os.unlink(tmp_path / "cni-delguard")
    os.unlink(tmp_path / p.version_name / "_internal" / "version")
    assert "incomplete" in bundle.verify(str(tmp_path / p.version_name), deep=False)
    install(bundles["v1"], tmp_path)
    assert bundle.check(str(tmp_path), deep=True) is None
    assert exec_guard(tmp_path).stdout == "v1"


def test_check_sees_a_changed_file_only_when_deep(tmp_path, bundles):
    p = install(bundles["v1"], tmp_path)
    (tmp_path / p.version_name / "_internal" / "version").write_text("v9")  # same size
    assert bundle.check(str(tmp_path)) is None
    assert "differs from its manifest" in bundle.check(str(tmp_path), deep=True)
    assert not bundle.plan(str(bundles["v1"]), str(tmp_path)).up_to_date


# A runtime: its own process, as containerd is. Exec'd from threads of this process instead, a
# fork taken while the installer (this process) had a new file open for writing kept that fd until
# its exec, and another exec of the new file failed with ETXTBSY in 2 runs of 3: a race of the
# test, since a runtime never shares fds with the installer. Each line: start, end (CLOCK_MONOTONIC,
# one clock for every process), exit code, stdout, stderr of one exec.
RUNTIME = """
import os, subprocess, sys, time
exe, stop = sys.argv[1], sys.argv[2]
while not os.path.exists(stop):
    start = time.monotonic()
    r = subprocess.run([exe], capture_output=True, text=True, check=False)
    print(repr((start, time.monotonic(), r.returncode, r.stdout, r.stderr[-300:])), flush=True)
"""

INSTALLS = 40  # installs (and so switches and prunes) the runtimes exec through


def could_be_pruned(start: float, end: float, installs: list[tuple[float, float]]) -> bool:
    """Whether the version an exec started at `start` ran from may be gone before `end`.

    The version current when it started is kept until the install after the one that switches
    away from it (bundle.py), so that takes an install that ended after `start` followed by one
    that began before `end`: a promise of one switch, not of a time.
    """
    return any(a_end > start and b_begin < end for (_, a_end), (b_begin, _) in pairwise(installs))


def test_exec_during_repeated_installs_never_fails(tmp_path):
    """A runtime execs the plugin while versions are copied in, switched and pruned.

    The installs are 50 ms apart (a real upgrade is minutes apart): a plugin started just before
    a switch must survive it, since its version is kept until the next one; an exec that spanned
    two installs is not held to that (its version may be pruned under it, as documented).
    """
    names = ("v1", "v2", "v3")
    srcs = [make_bundle(tmp_path / v, v, filler=4 << 20) for v in names]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    install(srcs[0], bin_dir)
    stop = tmp_path / "stop"
    logs = [tmp_path / f"runtime-{i}.log" for i in range(2)]
    argv = [sys.executable, "-I", "-c", RUNTIME, str(bin_dir / "cni-delguard"), str(stop)]
    runtimes = []
    for log in logs:
        with log.open("w") as out:
            runtimes.append(subprocess.Popen(argv, stdout=out))
    installs: list[tuple[float, float]] = []

    def install_next() -> bool:
        """One more install; done after INSTALLS of them, once each version has been run."""
        begin = time.monotonic()
        install(srcs[len(installs) % 3], bin_dir)
        installs.append((begin, time.monotonic()))
        seen = {line for log in logs for line in log.read_text().splitlines()}
        return len(installs) >= INSTALLS and all(any(f"'{v}'" in s for s in seen) for v in names)

    wait_for(install_next, f"{INSTALLS} installs and a run of each version", timeout=120,
             every=0.05)
    stop.touch()
    for proc in runtimes:
        assert proc.wait(timeout=60) == 0, "a runtime loop died"
    results = [ast.literal_eval(line) for log in logs for line in log.read_text().splitlines()]
    runs = [out for _, _, _, out, _ in results]
    failed = [r for r in results if r[2] != 0 or r[3] not in names]
    assert [r for r in failed if not could_be_pruned(r[0], r[1], installs)] == []
    assert set(names) <= set(runs)
    assert len(versions(bin_dir)) == 2


def test_a_version_that_does_not_run_never_replaces_one_that_does(tmp_path, bundles):
    """An upgrade whose plugin cannot run on the node (here: it fails VERSION) is refused before
    its link is switched: the conf keeps naming a plugin that runs."""
    (tmp_path / "bin").mkdir()
    install(bundles["v1"], tmp_path / "bin")
    broken = make_bundle(tmp_path / "broken", "broken")
    (broken / "cni-delguard").write_text("#!/bin/sh\necho 'cannot start' >&2\nexit 1\n")
    p = bundle.plan(str(broken), str(tmp_path / "bin"))
    refused = r"does not answer VERSION \(exit 1\): cannot start"
    with pytest.raises(bundle.BundleError, match=refused):
        bundle.apply(p)
    assert exec_guard(tmp_path / "bin").stdout == "v1"
    assert not (tmp_path / "bin" / p.version_name).exists()


def plant(version_dir, text):
    """What someone who can write the bin dir leaves: the version's own name, a changed file,
    and a manifest that matches the changed tree (the bin dir's manifest then vouches for it)."""
    (version_dir / "_internal" / "version").write_text(text)
    entries = bundle.manifest(str(version_dir))
    body = {"digest": bundle.digest_of(entries), "arch": None, "entries": entries}
    (version_dir / bundle.MANIFEST).write_text(json.dumps(body, sort_keys=True))


def test_a_planted_version_dir_is_never_adopted(tmp_path, bundles):
    """Issue 38, item 6: a version dir is compared with the image's manifest, never with the
    one beside it in the bin dir. Failed on 20ffe12: the planted copy, its manifest made to
    match, was `up_to_date` and stayed linked."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    p = install(bundles["v1"], bin_dir)
    plant(bin_dir / p.version_name, "xx")  # same size as "v1": only the sha256 tells
    assert bundle.verify(str(bin_dir / p.version_name), deep=True) is None  # its own manifest
    assert not bundle.plan(str(bundles["v1"]), str(bin_dir)).up_to_date
    install(bundles["v1"], bin_dir)
    assert exec_guard(bin_dir).stdout == "v1"
    entries = bundle.image_entries(str(bundles["v1"]))
    assert bundle.check(str(bin_dir), deep=True, expected=entries) is None


def test_a_version_dir_planted_before_the_first_install_is_repaired(tmp_path, bundles):
    """The same, planted under the version's name before any install: the slot is checked
    against the image, so the install replaces the planted copy before linking it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    name = bundle.plan(str(bundles["v1"]), str(bin_dir)).version_name
    planted = bin_dir / name
    shutil.copytree(bundles["v1"], planted)
    plant(planted, "xx")
    assert not bundle.plan(str(bundles["v1"]), str(bin_dir)).slot_intact
    install(bundles["v1"], bin_dir)
    assert (planted / "_internal" / "version").read_text() == "v1"  # replaced, not adopted
    assert exec_guard(bin_dir).stdout == "v1"
    install(bundles["v2"], bin_dir)
    install(bundles["v1"], bin_dir)  # a rollback never takes the planted copy back
    assert exec_guard(bin_dir).stdout == "v1"
    assert (bin_dir / bundle.LINK_NAME).resolve().parent.joinpath("_internal/version").read_text() \
        == "v1"


def test_the_watchers_probe_finds_a_tampered_version_and_repair_restores_it(tmp_path, bundles):
    """The watcher's periodic check reads every file against the image's manifest: a byte
    changed in place, with the manifest rewritten to match, is repaired (issue 38, item 6)."""
    from cni_delguard.node import actions, watch

    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir(mode=0o700)
    p = install(bundles["v1"], bin_dir)
    plant(bin_dir / p.version_name, "xx")
    now = [1000.0]
    expected = bundle.image_entries(str(bundles["v1"]))
    probe = watch.BundleProbe(str(bin_dir), lambda: now[0], expected=expected)
    problem = probe.problem()
    assert problem is not None and "not the image's" in problem
    assert watch.BundleProbe(str(bin_dir), lambda: now[0]).problem() is None  # main's check
    opts = actions.Options(root="/", bin_dir=str(bin_dir), conf_dir=str(tmp_path / "net"),
                           conf_file=None, wrap="multus", state_dir=str(state),
                           bundle_dir=str(bundles["v1"]))
    assert actions.repair(opts, lambda line: None, expected)
    assert exec_guard(bin_dir).stdout == "v1"
    assert bundle.check(str(bin_dir), deep=True, expected=expected) is None
