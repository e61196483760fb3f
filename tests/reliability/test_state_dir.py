"""A full, read-only, missing, symlinked or unsafe state dir; the modes of what the guard writes.

For each broken state dir: ADD fails with code 5 before the delegate runs (the fake's record shows
no ADD, so there is nothing to leak); DEL of an attachment with no evidence still succeeds; STATUS
(spec 1.1.0) reports the problem with code 50; nothing outside the state dir changes (the victim
a symlink points at included). "fresh" is a state dir the guard has never used, "primed" one that
already has the network's directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability import mounts
from tests.reliability.harness import Bench, attachment_files, tree

IO_FAILURE = 5
STATUS_NOT_AVAILABLE = 50
StateSetup = Callable[[Bench, bool], contextlib.AbstractContextManager[Path]]


def _make_state(parent: Path, primed: bool, name: str = "state") -> Path:
    state = parent / name
    state.mkdir(mode=0o700)
    if primed:
        (state / "networks" / "net1").mkdir(mode=0o700, parents=True)
        os.chmod(state / "networks", 0o700)
    return state


@contextlib.contextmanager
def enospc_blocks(bench: Bench, primed: bool) -> Iterator[Path]:
    with mounts.tmpfs(bench.root / "mnt", size="256k") as mnt:
        state = _make_state(mnt, primed)
        assert mounts.fill(mnt) > 0
        yield state


@contextlib.contextmanager
def enospc_inodes(bench: Bench, primed: bool) -> Iterator[Path]:
    with mounts.tmpfs(bench.root / "mnt", size="4m", inodes=64) as mnt:
        state = _make_state(mnt, primed)
        assert mounts.use_up_inodes(mnt) > 0
        yield state


@contextlib.contextmanager
def read_only(bench: Bench, primed: bool) -> Iterator[Path]:
    with mounts.tmpfs(bench.root / "mnt", size="1m") as mnt:
        state = _make_state(mnt, primed)
        mounts.remount_ro(mnt)
        yield state


@contextlib.contextmanager
def symlinked(bench: Bench, primed: bool) -> Iterator[Path]:
    victim = _make_state(bench.root, primed, name="victim-state")
    link = bench.root / "state-link"
    link.symlink_to(victim)
    yield link


@contextlib.contextmanager
def dangling_symlink(bench: Bench, primed: bool) -> Iterator[Path]:
    link = bench.root / "state-link"
    link.symlink_to(bench.root / "victim" / "not-there")
    yield link


def _mode(mode: int) -> StateSetup:
    @contextlib.contextmanager
    def setup(bench: Bench, primed: bool) -> Iterator[Path]:
        state = _make_state(bench.root, primed, name="unsafe-state")
        os.chmod(state, mode)
        yield state

    return setup


@contextlib.contextmanager
def foreign_owner(bench: Bench, primed: bool) -> Iterator[Path]:
    state = _make_state(bench.root, primed, name="foreign-state")
    os.chown(state, 65534, 65534)
    yield state


@contextlib.contextmanager
def networks_symlink(bench: Bench, primed: bool) -> Iterator[Path]:
    state = _make_state(bench.root, False, name="state2")
    victim = bench.root / "victim" / "networks"
    (victim / "net1").mkdir(mode=0o700, parents=True)
    os.chmod(victim, 0o700)
    (state / "networks").symlink_to(victim)
    yield state


@contextlib.contextmanager
def network_dir_symlink(bench: Bench, primed: bool) -> Iterator[Path]:
    state = _make_state(bench.root, False, name="state2")
    (state / "networks").mkdir(mode=0o700)
    victim = bench.root / "victim" / "net1"
    victim.mkdir(mode=0o700)
    (state / "networks" / "net1").symlink_to(victim)
    yield state


SETUPS: dict[str, StateSetup] = {
    "enospc-blocks": enospc_blocks,
    "enospc-inodes": enospc_inodes,
    "read-only": read_only,
    "symlink": symlinked,
    "dangling-symlink": dangling_symlink,
    "group-writable": _mode(0o770),
    "other-writable": _mode(0o707),
    "sticky-world-writable": _mode(0o1777),
    "foreign-owner": foreign_owner,
    "networks-symlink": networks_symlink,
    "network-dir-symlink": network_dir_symlink,
}
XFAIL_ADD: dict[Any, str] = {}
XFAIL_STATUS: dict[Any, str] = {}


def _cases(xfails: dict[Any, str], primed_too: bool = True) -> list[Any]:
    out = []
    for name in SETUPS:
        for primed in (False, True) if primed_too else (False,):
            label = "primed" if primed else "fresh"
            reason = xfails.get((name, label)) or xfails.get(name)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(name, primed, id=f"{name}-{label}", marks=marks))
    return out


def _outside(bench: Bench, state: Path) -> dict[str, Any]:
    return tree(bench.root, skip=(state, bench.log_file.parent))


@pytest.mark.parametrize(("case", "primed"), _cases(XFAIL_ADD))
def test_add_fails_cleanly_before_the_delegate(bench: Bench, case: str, primed: bool) -> None:
    with SETUPS[case](bench, primed) as state:
        conf = bench.conf(stateDir=str(state))
        before = _outside(bench, state)
        run = bench.run("ADD", conf)
        assert run.rc == 1, run.describe()
        assert run.error()["code"] == IO_FAILURE, run.describe()
        assert b"Traceback" not in run.stderr
        assert bench.records() == [], "the delegate ran although no attempted marker was written"
        assert _outside(bench, state) == before, "something outside the state dir changed"


@pytest.mark.parametrize(("case", "primed"), _cases({}))
def test_del_without_evidence_still_succeeds(bench: Bench, case: str, primed: bool) -> None:
    with SETUPS[case](bench, primed) as state:
        conf = bench.conf(stateDir=str(state))
        before = _outside(bench, state)
        run = bench.run("DEL", conf)
        assert (run.rc, run.stdout, run.stderr) == (0, b"", b""), run.describe()
        assert bench.records() == []
        assert _outside(bench, state) == before


@pytest.mark.parametrize(("case", "primed"), _cases(XFAIL_STATUS, primed_too=False))
def test_status_reports_the_broken_state_dir(bench: Bench, case: str, primed: bool) -> None:
    with SETUPS[case](bench, primed) as state:
        conf = bench.conf(stateDir=str(state), version="1.1.0")
        before = _outside(bench, state)
        run = bench.run("STATUS", conf)
        assert run.rc == 1, run.describe()
        assert run.error()["code"] == STATUS_NOT_AVAILABLE, run.describe()
        assert _outside(bench, state) == before


def test_missing_state_dir_is_created_owner_only(bench: Bench) -> None:
    """A leaf in a place the admin named (the bench's temp dir); a missing parent never
    (test_hardening.py::test_a_nad_path_under_the_built_in_places_creates_no_dir)."""
    state = bench.root / "missing-state"
    conf = bench.conf(stateDir=str(state), version="1.1.0")
    assert bench.run("STATUS", conf).rc == 0
    run = bench.run("ADD", conf)
    assert run.rc == 0, run.describe()
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert bench.run("DEL", conf).rc == 0
    assert attachment_files(os.listdir(state / "networks" / "net1"), "c1") == []


def test_state_dir_removed_under_a_completed_add(bench: Bench) -> None:
    """What the guard cannot promise: with its markers wiped and no libcni cache or prevResult,
    a DEL has no evidence and skips, so the delegate keeps its state (documented)."""
    conf = bench.conf()
    assert bench.run("ADD", conf).rc == 0
    for path in sorted(bench.state_dir.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    run = bench.run("DEL", conf)
    assert (run.rc, run.stdout) == (0, b"")
    assert bench.fake_holds(), "expected the documented leak: the delegate was not called"
    assert [r["command"] for r in bench.records()] == ["ADD"]


# -- planted symlinks inside a good state dir --------------------------------------------------
def _plant(bench: Bench, name: str) -> Path:
    """A symlink named `name` in the network dir pointing at a victim file outside."""
    victim = bench.root / "victim" / "precious"
    victim.write_bytes(b"precious\n")
    bench.net_dir().mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(bench.state_dir / "networks", 0o700)
    (bench.net_dir() / name).symlink_to(victim)
    return victim


def test_marker_symlink_is_replaced_not_followed(bench: Bench) -> None:
    victim = _plant(bench, "c1:eth0.json")
    conf = bench.conf()
    assert bench.run("ADD", conf).rc == 0
    assert victim.read_bytes() == b"precious\n"
    assert (bench.net_dir() / "c1:eth0.json").is_file()
    assert not (bench.net_dir() / "c1:eth0.json").is_symlink()
    assert bench.run("DEL", conf).rc == 0
    assert victim.read_bytes() == b"precious\n"


def test_lock_symlink_refuses_add_and_lets_del_pass(bench: Bench) -> None:
    victim = _plant(bench, "c1:eth0.lock")
    conf = bench.conf()
    add = bench.run("ADD", conf)
    assert add.rc == 1, add.describe()
    assert add.error()["code"] == IO_FAILURE
    assert bench.records() == []
    delete = bench.run("DEL", conf)
    assert (delete.rc, delete.stdout) == (0, b""), delete.describe()
    assert victim.read_bytes() == b"precious\n"


def test_log_symlink_is_not_followed(bench: Bench) -> None:
    victim = bench.root / "victim" / "log-victim"
    victim.write_bytes(b"keep\n")
    bench.log_file.symlink_to(victim)
    run = bench.run("DEL", bench.conf())
    assert (run.rc, run.stdout) == (0, b""), run.describe()
    assert victim.read_bytes() == b"keep\n"


# -- modes -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "umask", [0o000, 0o022, 0o077], ids=["umask-000", "umask-022", "umask-077"]
)
def test_everything_written_is_owner_only(bench: Bench, umask: int) -> None:
    old = os.umask(umask)
    try:
        state = bench.root / "fresh-state"
        conf = bench.conf(stateDir=str(state))
        gated = bench.conf(bench.gated(gates=["ADD:done"]), stateDir=str(state))
        with _during_add(bench, gated) as seen:
            pass
        assert bench.run("ADD", conf, "c2").rc == 0
    finally:
        os.umask(old)
    modes = {str(p.relative_to(state)): stat.S_IMODE(p.lstat().st_mode) for p in state.rglob("*")}
    modes["."] = stat.S_IMODE(state.stat().st_mode)
    modes |= seen
    wrong = {
        k: f"{v:o}"
        for k, v in modes.items()
        if v != (0o700 if (state / k).is_dir() or k in (".", "networks") else 0o600)
    }
    assert wrong == {}
    assert {p.suffix for p in state.rglob("*") if p.is_file()} >= {".json", ".lock"}
    assert stat.S_IMODE(bench.log_file.stat().st_mode) == 0o600


@contextlib.contextmanager
def _during_add(bench: Bench, conf: dict[str, Any]) -> Iterator[dict[str, int]]:
    """Modes of the marker and lock while the delegate runs (lock held, attempted marker)."""
    from tests.reliability.procs import Gates

    gates = Gates(bench.gate_dir)
    guard = bench.start("ADD", conf)
    gates.wait("c1", "ADD", "done")
    ndir = Path(conf["stateDir"]) / "networks" / "net1"
    seen = {f"during-add/{p.name}": stat.S_IMODE(p.lstat().st_mode) for p in ndir.iterdir()}
    gates.release("c1", "ADD", "done")
    assert guard.finish().rc == 0
    yield seen


# ext4 remounts itself read-only after a disk error (errors=remount-ro): an existing lock file
# is still locked through a read-only descriptor, and the marker that cannot be removed is kept.
@pytest.mark.parametrize("marker", ["attempted", "completed"])
def test_del_with_evidence_on_a_read_only_state_dir(bench: Bench, marker: str) -> None:
    with mounts.tmpfs(bench.root / "mnt", size="1m") as mnt:
        state = _make_state(mnt, primed=True)
        conf = bench.conf(stateDir=str(state))
        ndir = state / "networks" / "net1"
        (ndir / "c1:eth0.json").write_text(json.dumps({"state": marker}))
        (ndir / "c1:eth0.lock").touch(mode=0o600)
        bench.fake_state.joinpath("c1:eth0").write_text("{}")
        mounts.remount_ro(mnt)
        run = bench.run("DEL", conf)
        assert (run.rc, run.stdout) == (0, b""), run.describe()
        assert bench.records("DEL"), "the delegate's DEL was not forwarded"
