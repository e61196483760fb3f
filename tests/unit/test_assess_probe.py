"""cni_delguard/ops/assess/probe.py through `examine`, in-process, on node roots of each kind
of chain (tests/support/assessroot.py), wrapped and not; the runtime answers CRI Version on the
socket where its distribution puts it (grpcio's server, tests/unit/test_assess_cri.py says what
it stands for; the real runtimes are the node-root and e2e suites' part)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cni_delguard.ops import assess
from cni_delguard.ops.assess import chains, report
from tests.support import assessroot, peers
from tests.support.noderoot import needs_root

from .test_assess_cri import Server


def multus() -> Path | None:
    peer = peers.find("multus", "v4.3.0")
    return peer.bin("multus") if peer.built() else None


@pytest.mark.parametrize("wrapped", [True, False], ids=["wrapped", "unwrapped"])
@pytest.mark.parametrize("chain", [*assessroot.CHAINS, assessroot.THIN_NAME],
                         ids=lambda c: c.name)
def test_what_sits_behind_the_guard(tmp_path: Path, chain: assessroot.Chain,
                                    wrapped: bool) -> None:
    conf = assessroot.write(tmp_path, chain, wrapped)
    seen = assess.examine(str(tmp_path))
    doc = seen.as_json()
    assert doc["conf"]["path"] == str(conf)
    assert doc["conf"]["wrapped"] is wrapped
    assert doc["conf"]["mode"] == ("enforce" if wrapped else None)
    assert doc["chain"]["kind"] == chain.kind
    assert tuple(doc["behind"]["delegates"]) == chain.delegates
    if chain.name == "thick-auto":
        assert doc["behind"]["multusConfigFile"] == "auto"
        assert any("read as" in n for n in doc["notes"])  # /host/... found in the conf dir
    if chain.name == "thin-name":
        assert doc["status"] == "unmeasured"
        assert "ran no chain of this kind" in doc["unmeasuredBecause"]


def test_multus_says_its_version(tmp_path: Path) -> None:
    needs_root()  # its binary runs chrooted into the node's root
    binary = multus()
    if binary is None:
        pytest.skip("multus v4.3.0 is not built: tools/install-peers.sh multus")
    assessroot.write(tmp_path, assessroot.BY_NAME["thin-inline"], True, binary)
    doc = assess.examine(str(tmp_path)).as_json()
    assert doc["behind"]["multusVersion"] == "v4.3.0"
    assert doc["behind"]["multusVersionFrom"] == "/opt/cni/bin/multus -version"


@pytest.mark.parametrize(
    ("socket", "name", "version", "runtime", "range_"),
    [
        pytest.param("/run/containerd/containerd.sock", "containerd", "1.6.20~ds1", "containerd",
                     "containerd-before-boundary", id="containerd-1.6"),
        pytest.param("/run/k3s/containerd/containerd.sock", "containerd", "v1.7.23-k3s1",
                     "containerd", "containerd-after-boundary", id="k3s"),
        pytest.param("/run/crio/crio.sock", "cri-o", "1.36.3", "cri-o", "cri-o", id="cri-o"),
        pytest.param("/run/containerd/containerd.sock", "docker", "27.0.0", None, None,
                     id="not-a-matrix-runtime"),
    ],
)
def test_the_runtime_from_its_socket(tmp_path: Path, socket: str, name: str, version: str,
                                     runtime: str | None, range_: str | None) -> None:
    assessroot.write(tmp_path, assessroot.BY_NAME["plain"], True)
    path = tmp_path / socket.lstrip("/")
    path.parent.mkdir(parents=True)
    server = Server(path, ("runtime.v1",), name, version)
    try:
        doc = assess.examine(str(tmp_path)).as_json()
    finally:
        server.server.stop(0)
    assert doc["runtime"]["name"] == runtime
    assert doc["runtime"]["version"] == version
    assert doc["runtime"]["from"] == f"CRI Version on {path} (runtime.v1)"
    assert (doc["range"] or {}).get("name") == range_


def test_an_endpoint_given_is_asked_and_its_failure_said(tmp_path: Path) -> None:
    assessroot.write(tmp_path, assessroot.BY_NAME["plain"], True)
    doc = assess.examine(str(tmp_path), endpoint=f"unix://{tmp_path}/none.sock").as_json()
    assert doc["runtime"] is None or doc["runtime"]["from"] != "CRI Version"
    assert any("none.sock" in t for t in doc["runtimeTried"])


def test_no_runtime_is_unmeasured(tmp_path: Path) -> None:
    assessroot.write(tmp_path, assessroot.BY_NAME["plain"], True)
    seen = assess.examine(str(tmp_path))
    assert seen.as_json()["status"] == "unmeasured"
    assert "the runtime was not found" in seen.summary()
    assert "--runtime NAME://VERSION" in seen.summary()  # what the installer's pod can do


@pytest.mark.parametrize(
    ("given", "name", "version"),
    [
        pytest.param("containerd://2.1.6", "containerd", "2.1.6", id="containerd"),
        pytest.param("containerd://1.6.20~ds1", "containerd", "1.6.20~ds1", id="debian"),
        pytest.param("cri-o://1.36.3", "cri-o", "1.36.3", id="cri-o"),
        pytest.param("docker://28.2.2", None, "28.2.2", id="not-a-matrix-runtime"),
    ],
)
def test_the_runtime_as_the_kubelet_reports_it(tmp_path: Path, given: str, name: str | None,
                                               version: str) -> None:
    """In the installer's pod no runtime socket or binary is there: the user gives what
    `kubectl get node -o wide` shows, and the matrix is read for it."""
    assessroot.write(tmp_path, assessroot.BY_NAME["plain"], True)
    doc = assess.examine(str(tmp_path), runtime=given).as_json()
    assert (doc["runtime"]["name"], doc["runtime"]["version"]) == (name, version)
    assert doc["runtime"]["from"] == f"--runtime {given}"
    assert (doc["status"] == "measured") == (name is not None)


@pytest.mark.parametrize("bad", ["containerd", "containerd://", "://2.1.6",
                                 "containerd://2.1.6; rm -rf /", "containerd://" + "9" * 65])
def test_a_runtime_given_that_is_not_one_is_refused(bad: str) -> None:
    from cni_delguard.ops.assess import probe
    from cni_delguard.tooling import UsageError

    with pytest.raises(UsageError, match="NAME://VERSION"):
        probe.given(bad)


def test_no_conf_is_read_and_said(tmp_path: Path) -> None:
    (tmp_path / "etc/cni/net.d").mkdir(parents=True)
    doc = assess.examine(str(tmp_path)).as_json()
    assert doc["conf"]["path"] is None and doc["chain"] is None
    assert doc["status"] == "unmeasured"


def test_the_summary_is_one_line_and_the_json_has_every_key(tmp_path: Path) -> None:
    assessroot.write(tmp_path, assessroot.BY_NAME["thick-auto"], True)
    seen = assess.examine(str(tmp_path))
    assert "\n" not in seen.summary()
    doc = seen.as_json()
    assert doc["schema"] == report.SCHEMA
    assert set(doc) == {"schema", "root", "layout", "confDir", "binDir", "runtime",
                        "runtimeTried", "range", "conf", "behind", "chain", "notes", "matrix",
                        "status", "unmeasuredBecause", "measured", "unmeasuredChains",
                        "releaseValve", "summary"}
    assert doc["behind"]["plugin"] == chains.MULTUS_THICK
