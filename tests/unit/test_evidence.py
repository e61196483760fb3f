"""tests/support/evidence.py: a kubelet-driven run's matrix rows (its own verdict unless a row
says otherwise) and where it is kept, per suite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import evidence, matrix


class Standalone(evidence.KubeletEvidence):
    chain = "fake-stateful"
    release = "v1.35.4"


class Cluster(evidence.KubeletEvidence):
    chain = "fake-stateful"
    driver = "cluster"
    kept = "cluster"
    release = "v1.35.4"


@pytest.mark.parametrize(("kind", "given", "row"), [
    pytest.param(Standalone, {}, (True, "removed", 3.5, "kubelet"), id="its-own-verdict"),
    pytest.param(Standalone, {"guard": False, "outcome": "stuck", "seconds": 9.0},
                 (False, "stuck", 9.0, "kubelet"), id="a-row-of-its-own"),
    pytest.param(Cluster, {}, (True, "removed", 3.5, "cluster"), id="the-suites-driver"),
])
def test_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                kind: type[evidence.KubeletEvidence], given: dict[str, object],
                row: tuple[object, ...]) -> None:
    monkeypatch.setenv("DELGUARD_E2E_CACHE", str(tmp_path))
    ev = kind("double-del", "containerd-2.1", "2.1.6", True, outcome="removed", seconds=3.5)
    ev.record("double-del", **given)  # type: ignore[arg-type]
    [got] = matrix.load().rows
    assert (got.guard, got.outcome, got.seconds, got.driver) == row
    assert got.kubernetes == "v1.35.4"  # the suite's own release, unless the run says another
    assert ev.rows == [{**ev.rows[0], "driver": row[3], "chain": "fake-stateful"}]


@pytest.mark.parametrize(("given", "release", "name"), [
    pytest.param("", "v1.35.4", "reboot-containerd-1.6-control.json", id="the-suites-own"),
    pytest.param("v1.35.4", "v1.35.4", "reboot-containerd-1.6-control.json", id="named-as-own"),
    pytest.param("v1.37.2", "v1.37.2", "reboot-containerd-1.6-control-v1.37.2.json",
                 id="another-minor-kept-apart"),
])
def test_a_runs_release_is_in_its_row_and_its_kept_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str, release: str,
        name: str) -> None:
    monkeypatch.setenv("DELGUARD_E2E_CACHE", str(tmp_path))
    ev = Standalone("reboot", "containerd-1.6", "1.6.20", False, outcome="removed",
                    kubernetes=given)
    ev.record("reboot")
    [got] = matrix.load().rows
    assert got.kubernetes == release
    assert ev.save() == tmp_path / "kubelet" / name


def test_save_keeps_it_under_the_suites_dir_without_its_settings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELGUARD_E2E_CACHE", str(tmp_path))
    path = Cluster("reboot", "containerd-1.6", "1.6.20", False).save()
    assert path == tmp_path / "cluster" / "reboot-containerd-1.6-control.json"
    kept = json.loads(path.read_text())
    assert kept["scenario"] == "reboot" and not {"driver", "kept", "chain"} & set(kept)


def test_quote_cuts_lines_and_keeps_the_first() -> None:
    assert evidence.quote(["x" * 800, "b", "c"]) == ["x" * evidence.QUOTE, "b"]
