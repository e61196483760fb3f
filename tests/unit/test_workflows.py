"""The files a public repository host reads (.github/): the workflows pass actionlint (the peer of
peers/pins.tsv), say they are not run here, and run what CONTRIBUTING.md says; the bug form asks
for the bugreport archive; none of them, nor SECURITY.md, names an address of the project's own
(packaging/project.env is where it is set)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support import peers

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
BUG_FORM = REPO / ".github" / "ISSUE_TEMPLATE" / "bug_report.yml"


def test_there_are_the_two_workflows():
    assert [p.name for p in WORKFLOWS] == ["release.yml", "tests.yml"]


def test_actionlint_is_clean():
    actionlint = peers.built_or_skip("actionlint").bin("actionlint")
    r = subprocess.run([str(actionlint), "-no-color", *map(str, WORKFLOWS)], cwd=REPO,
                       capture_output=True, text=True, check=False, timeout=120)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_actionlint_does_catch_a_broken_workflow(tmp_path):
    """The check above can fail: an unknown event and a bad expression are found."""
    actionlint = peers.built_or_skip("actionlint").bin("actionlint")
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text("on: pushed\njobs:\n  a:\n    runs-on: ubuntu-24.04\n"
                   "    steps:\n      - run: echo ${{ github.nope( }}\n")
    r = subprocess.run([str(actionlint), "-no-color", str(bad)], cwd=tmp_path,
                       capture_output=True, text=True, check=False, timeout=120)
    assert r.returncode == 1 and "pushed" in r.stdout


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_each_workflow_says_it_is_not_run_here(path):
    assert "Not run here" in path.read_text()


def test_the_tests_run_on_every_change_and_the_release_on_a_tag():
    tests = yaml.safe_load((REPO / ".github/workflows/tests.yml").read_text())
    release = yaml.safe_load((REPO / ".github/workflows/release.yml").read_text())
    # PyYAML reads the key `on` as True (YAML 1.1)
    assert {"push", "pull_request"} <= set(tests[True])
    assert release[True] == {"push": {"tags": ["v*"]}}
    runs = "\n".join(s.get("run", "") for j in tests["jobs"].values() for s in j["steps"])
    for command in ("tools/test.sh", "-m ruff check .", "-m mypy", "-m pytest"):
        assert command in runs
    steps = [s.get("run", "") for j in release["jobs"].values() for s in j["steps"]]
    assert any("tools/release.sh" in r for r in steps)


def test_the_bug_form_asks_for_the_bugreport_archive():
    form = yaml.safe_load(BUG_FORM.read_text())
    (field,) = [b for b in form["body"] if b.get("id") == "bugreport"]
    assert field["validations"]["required"] is True
    assert "cni-delguard bugreport" in field["attributes"]["description"]


@pytest.mark.parametrize("path", [*WORKFLOWS, BUG_FORM, REPO / "SECURITY.md"],
                         ids=lambda p: p.name)
def test_no_address_of_the_projects_own_is_written(path):
    """Where the project is published is packaging/project.env's, and only there."""
    text = path.read_text()
    for host in ("github.com/", "ghcr.io/", "gitlab.com/", "quay.io/", "docker.io/"):
        assert host not in text, f"{path.name} names {host}"
