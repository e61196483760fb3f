"""Every file generated from code or data is the render of its sources (tools/render.py --check):
README's and docs/compatibility.md's tables and the verdicts assess ships from the matrix of
record, the monitoring overlay's rules from its settings, docs/configuration.md's keys table from
the config model, the Helm chart's copies of the kustomize files (tools/generate-chart.py). The
tool is run as a user runs it, and shown to find a stale file and write it again."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from cni_delguard.ops.assess import verdicts as shipped
from delguard_build import matrix, rules

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO / "tools" / "render.py"


def render(*args: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode in (0, 1), r.stderr
    return r


def test_every_generated_file_is_current() -> None:
    r = render("--check")
    assert r.returncode == 0, f"stale: tools/render.py --write\n{r.stdout}{r.stderr}"


def test_the_pages_and_assess_name_the_run_of_record() -> None:
    record = matrix.record()
    for page in ("README.md", "docs/compatibility.md"):
        text = (REPO / page).read_text(encoding="utf-8")
        assert record.short_commit in text and record.date in text, page
    assert shipped.shipped().commit == record.commit  # what assess reads is that file


def test_a_stale_overlay_is_found_and_written_again(tmp_path: Path) -> None:
    """The check above can fail: settings changed without rendering again."""
    own = REPO / rules.OVERLAY
    doc = yaml.safe_load((own / "settings.yaml").read_text(encoding="utf-8"))
    doc["spec"]["scrapeInterval"] = "60s"
    (tmp_path / "settings.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    shutil.copy(own / "prometheusrule.yaml", tmp_path)
    stale = render("--check", "--overlay", str(tmp_path))
    assert stale.returncode == 1 and "prometheusrule.yaml" in stale.stderr
    assert render("--write", "--overlay", str(tmp_path)).returncode == 0
    text = (tmp_path / "prometheusrule.yaml").read_text(encoding="utf-8")
    assert yaml.safe_load(text)["metadata"]["annotations"]["cni-delguard/scrape-interval"] == "60s"
    assert "[4m]" in text  # four intervals
    assert render("--check", "--overlay", str(tmp_path)).returncode == 0


def test_an_unknown_group_is_refused() -> None:
    r = subprocess.run([sys.executable, str(TOOL), "--check", "tables"], capture_output=True,
                       text=True, timeout=60, check=False)
    assert r.returncode == 2 and "tables" in r.stderr
