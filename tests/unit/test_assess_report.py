"""cni_delguard/ops/assess/report.py: a node's facts and the shipped verdicts -> measured or
unmeasured, what the text, the JSON and the one-line summary say (pure: made-up facts, verdicts
built by delguard_build/verdicts.py from made-up rows, as the shipped file is built)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from cni_delguard import cli
from cni_delguard.ops.assess import chains, report, verdicts
from cni_delguard.ops.assess.report import Found, Runtime
from delguard_build import matrix
from delguard_build import verdicts as build

THICK = chains.Behind("multus-shim", chains.PATH, "/host/etc/cni/net.d/10-kube-ovn.conflist",
                      "auto", "v4.3.0", ("kube-ovn", "portmap"))


def rows(chain: str, version: str, *cases: tuple[str, str, str]) -> list[matrix.Row]:
    return [matrix.Row("containerd", version, chain, scenario, guard, outcome, 1.0,
                       kept=(1 if guard and scenario == "double-del" else 0) if guard else None)
            for scenario, without, with_guard in cases
            for guard, outcome in ((False, without), (True, with_guard))]


def shipped(m: matrix.Matrix) -> verdicts.Shipped:
    """The verdicts of `m` as this build would ship them (written, read back)."""
    return verdicts.parse(json.loads(build.dumps(m)))


MATRIX = shipped(matrix.Matrix("f" * 40, "2026-05-06", (
    *rows("multus-thick", "v2.1.6", ("double-del", "removed", "removed"),
          ("reboot", "removed", "removed")),
    *rows("cozystack-multus-v4.2.3", "v2.1.6", ("double-del", "removed", "removed")),
    *rows("fake-stateful", "1.6.20~ds1", ("double-del", "stuck", "removed"),
          ("completed-del-fails", "stuck", "stuck")),
)))


def found(runtime: Runtime | None, behind: chains.Behind) -> Found:
    f = Found(runtime=runtime, behind=behind)
    f.conf_path, f.wrapped, f.mode = "/etc/cni/net.d/00-multus.conf", True, "enforce"
    return f


@pytest.mark.parametrize(
    ("runtime", "behind", "status", "exact", "said"),
    [
        pytest.param(Runtime("containerd", "v2.1.6", "CRI"), THICK, "measured", True,
                     "stuck without the guard: nothing measured; the guard frees: nothing; it "
                     "keeps DELs from the delegate in: double-del [multus-thick, this version]",
                     id="thick-this-version"),
        pytest.param(Runtime("containerd", "v1.7.30", "CRI"), THICK, "measured", False,
                     "[multus-thick, measured on v2.1.6]", id="thick-another-version"),
        pytest.param(Runtime("containerd", "1.6.20~ds1", "CRI"), chains.Behind("bridge"),
                     "measured", True,
                     "stuck without the guard: double-del, completed-del-fails; the guard frees: "
                     "double-del; stuck with it too: completed-del-fails (the release valve: "
                     "`cni-delguard release`)",
                     id="plain-1.6"),
        pytest.param(Runtime("containerd", "1.6.20~ds1", "CRI"), THICK, "unmeasured", False,
                     "unmeasured: the matrix has no row of multus-thick, cozystack-multus-v4.2.3, "
                     "cozystack-multus-v4.3.0 in this range", id="thick-not-run-in-range"),
        pytest.param(None, chains.Behind("multus", chains.NAME, "kube-ovn"), "unmeasured", False,
                     "unmeasured: the runtime was not found: give it as `--runtime "
                     "NAME://VERSION`", id="nothing-known"),
        pytest.param(Runtime(None, "27.0.0", "CRI", "docker"), THICK, "unmeasured", False,
                     "runtime docker 27.0.0 is not one the matrix ran", id="another-runtime"),
    ],
)
def test_assessment(runtime: Runtime | None, behind: chains.Behind, status: str, exact: bool,
                    said: str) -> None:
    a = report.assessment(found(runtime, behind), MATRIX)
    assert ("measured" if a.measured else "unmeasured") == status
    assert [x.exact for x in a.measured][:1] == ([exact] if status == "measured" else [])
    assert said in report.summary(a)
    assert "(matrix ffffffffffff of 2026-05-06)" in report.summary(a)


def test_the_summary_speaks_of_the_chain_of_the_nodes_multus_version() -> None:
    behind = chains.Behind(**{**THICK.__dict__, "multus_version": "v4.2.3"})
    a = report.assessment(found(Runtime("containerd", "v2.1.6", "CRI"), behind), MATRIX)
    assert [x.chain.name for x in a.measured] == ["multus-thick", "cozystack-multus-v4.2.3"]
    assert a.unmeasured == ("cozystack-multus-v4.3.0",)
    assert "[cozystack-multus-v4.2.3, this version]" in report.summary(a)


def test_the_text_names_the_release_valve_only_when_something_stays_stuck() -> None:
    plain = report.assessment(found(Runtime("containerd", "1.6.20~ds1", "CRI"),
                                    chains.Behind("bridge")), MATRIX)
    text = "\n".join(report.text(plain))
    assert "not freed by the guard: `cni-delguard release`" in text
    assert "docs/runbooks.md" in text
    assert "a stand-in: whether bridge fails a DEL once it holds no state was not measured" in text
    thick = report.assessment(found(Runtime("containerd", "v2.1.6", "CRI"), THICK), MATRIX)
    assert "not freed by the guard" not in "\n".join(report.text(thick))


def test_the_json_says_each_run_of_each_scenario() -> None:
    a = report.assessment(found(Runtime("containerd", "v2.1.6", "CRI"), THICK), MATRIX)
    doc = report.as_json(a)
    json.dumps(doc, allow_nan=False)
    (thick,) = [m for m in doc["measured"] if m["chain"] == "multus-thick"]
    assert thick["keptFromDelegate"] == ["double-del"]
    assert thick["scenarios"][0] == {"scenario": "double-del", "effect": "unchanged", "runs": [
        {"version": "v2.1.6", "driver": "cri", "without": "removed", "with": "removed",
         "kept": 1}]}


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.BytesIO(), io.StringIO()
    code = cli.main(list(argv), {}, io.BytesIO(), out, err)
    return code, out.getvalue().decode(), err.getvalue()


def test_a_root_that_is_not_there_is_exit_2_and_one_line(tmp_path: Path) -> None:
    code, out, err = run_cli("assess", "--root", str(tmp_path / "none"))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "cannot read the node" in err


@pytest.mark.parametrize("output", ["text", "json"])
def test_a_node_with_nothing_is_exit_0(tmp_path: Path, output: str) -> None:
    os.makedirs(tmp_path / "etc/cni/net.d")
    code, out, err = run_cli("assess", "--root", str(tmp_path), "--output", output)
    assert code == 0, err
    if output == "json":
        assert json.loads(out)["status"] == "unmeasured"
    else:
        assert "unmeasured" in out and out.rstrip().splitlines()[-1].startswith("summary:")


def test_the_summary_says_the_release_valve_was_measured_when_it_was() -> None:
    m = shipped(matrix.Matrix("f" * 40, "2026-05-06", tuple(rows(
        "fake-stateful", "v2.1.6", ("completed-del-fails", "stuck", "stuck"),
        ("release", "stuck", "released")))))
    a = report.assessment(found(Runtime("containerd", "v2.1.6", "CRI"), chains.Behind("bridge")),
                          m)
    assert ("stuck with it too: completed-del-fails (`cni-delguard release` frees such a "
            "sandbox: measured)") in report.summary(a)
