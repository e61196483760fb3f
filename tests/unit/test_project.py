"""tools/project.py: the project's public home, one release parameter (packaging/project.env),
and what follows it: the chart's metadata (tools/generate-chart.py) and no invented address."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import project  # noqa: E402 (tools/project.py, by path)


def _generate_chart():
    path = REPO / "tools/generate-chart.py"
    spec = importlib.util.spec_from_file_location("generate_chart", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SET = "CNI_DELGUARD_REPOSITORY=https://git.example/org/cni-delguard\n" \
      "CNI_DELGUARD_IMAGE=registry.example/org/cni-delguard\n"


@pytest.mark.parametrize(
    ("text", "home"),
    [
        pytest.param("# nothing\n", project.Home(), id="comments-only"),
        pytest.param("CNI_DELGUARD_REPOSITORY=\nCNI_DELGUARD_IMAGE=\n", project.Home(),
                     id="empty"),
        pytest.param(SET, project.Home("https://git.example/org/cni-delguard",
                                       "registry.example/org/cni-delguard"), id="set"),
    ],
)
def test_parse(text, home):
    assert project.parse(text) == home


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("CNI_DELGUARD_REPO=x\n", id="unknown-key"),
        pytest.param("CNI_DELGUARD_REPOSITORY=http://git.example/org/x\n", id="not-https"),
        pytest.param("CNI_DELGUARD_REPOSITORY=https://git.example/org/x/\n", id="trailing-slash"),
        pytest.param('CNI_DELGUARD_REPOSITORY="https://git.example/org/x"\n', id="quoted"),
        pytest.param("CNI_DELGUARD_IMAGE=registry.example/org/x:1.0\n", id="image-with-tag"),
        pytest.param("CNI_DELGUARD_IMAGE=registry.example/org/x@sha256:ab\n", id="image-digest"),
    ],
)
def test_parse_refuses(text):
    with pytest.raises(project.ProjectError):
        project.parse(text)


def test_runbooks_follow_the_home_or_are_relative():
    assert project.Home().runbooks("0.1.0") == "docs/runbooks.md"
    home = project.parse(SET)
    assert home.runbooks("0.2.0") == (
        "https://git.example/org/cni-delguard/blob/v0.2.0/docs/runbooks.md")


def test_the_shipped_file_parses_and_names_no_address():
    """No invented address ships as a default: a release sets it."""
    assert project.load() == project.Home()


def test_the_chart_metadata_follows_the_home():
    gen = _generate_chart()
    chart = (REPO / "charts/cni-delguard/Chart.yaml").read_text()
    with_home = gen.chart_yaml(chart, project.parse(SET))
    assert "\nhome: https://git.example/org/cni-delguard\n" in with_home
    assert "sources:\n  - https://git.example/org/cni-delguard\n" in with_home
    assert gen.chart_yaml(with_home, project.parse(SET)) == with_home
    assert gen.chart_yaml(with_home, project.Home()) == chart
    assert "home:" not in chart


def test_no_file_names_an_address_the_project_does_not_control():
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True,
                             text=True, check=True).stdout.split()
    found = []
    for name in tracked:
        path = REPO / name
        if not path.is_file() or name == "tests/unit/test_project.py":
            continue
        if b"github.com/cni-delguard" in path.read_bytes():
            found.append(name)
    assert found == []


@pytest.mark.parametrize("key", ["repository", "image"])
def test_get_an_unset_key_says_where_to_set_it(key):
    r = subprocess.run([sys.executable, str(REPO / "tools/project.py"), "--get", key],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 3 and project.KEYS[key] in r.stderr
