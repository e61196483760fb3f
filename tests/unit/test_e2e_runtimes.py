"""tests/support/runtimes.py: what the runtime table reads from a runtime's output and log, and
the configs it renders (no runtime is started here)."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from tests.support import runtimes

CRIO_REQUEST = (
    'time="t" level=debug msg="Request: *v1.RunPodSandboxRequest: config:{metadata:{name:\\"pod\\"'
    '  uid:\\"uid-1\\"  namespace:\\"ns\\"}}" file="interceptors/interceptors.go:73" id=abc-1 '
    "name=/runtime.v1.RuntimeService/RunPodSandbox\n"
)
CRIO_RESPONSE = ('time="t" level=debug msg="Response error: context canceled" '
                 'file="interceptors/interceptors.go:84" id=abc-1 name=/runtime.v1.Runtime\n')
CONTAINERD_DONE = ('time="t" level=error msg="RunPodSandbox for &PodSandboxMetadata{Name:pod,'
                   'Uid:uid-1,Namespace:ns,Attempt:0,} failed, error" error="x"\n')
CRIO_EVENT = ('time="t" level=info msg="CNI monitoring event CREATE        '
              '\\"/tmp/dge2e-x/cni/net.d/10-e2e.conflist\\""\n')
CRIO_LOADED = 'time="t" level=info msg="Found CNI network e2e (type=x) at /tmp/x/10-e2e.conflist"\n'


def _row(key: str) -> runtimes.Runtime:
    fake_bins = {c: Path(f"/opt/{c}") for c in ("containerd", "ctr", "crio", "pinns")}
    return dataclasses.replace(runtimes.BY_KEY[key], binaries=lambda: fake_bins)


def _paths(tmp: Path) -> runtimes.Paths:
    return runtimes.Paths(tmp=tmp, socket=tmp / "cri.sock", state=tmp / "run" / "s",
                          cni_bin=tmp / "bin", cni_conf=tmp / "net.d", image="localhost/p:1",
                          snapshotter="overlayfs")


@pytest.mark.parametrize(
    ("line", "version"),
    [
        pytest.param("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3",
                     "1.6.20~ds1", id="debian"),
        pytest.param("containerd github.com/containerd/containerd/v2 v2.1.6 \n", "v2.1.6",
                     id="peer"),
    ],
)
def test_reported_version(line: str, version: str) -> None:
    assert runtimes.reported_version(line) == version


@pytest.mark.parametrize(
    ("key", "log", "finished"),
    [
        pytest.param("containerd-1.6", CONTAINERD_DONE, True, id="containerd-done"),
        pytest.param("containerd-1.6", CONTAINERD_DONE.replace("uid-1", "uid-2"), False,
                     id="containerd-other-pod"),
        pytest.param("cri-o-1.36", CRIO_REQUEST + CRIO_RESPONSE, True, id="crio-done"),
        pytest.param("cri-o-1.36", CRIO_REQUEST, False, id="crio-still-running"),
        pytest.param("cri-o-1.36", CRIO_REQUEST + CRIO_RESPONSE.replace("abc-1", "abc-2"), False,
                     id="crio-other-request"),
    ],
)
def test_run_pod_finished(key: str, log: str, finished: bool) -> None:
    assert runtimes.BY_KEY[key].run_pod_finished(log, "pod", "uid-1") is finished


@pytest.mark.parametrize(
    ("after_mark", "loaded"),
    [
        pytest.param(CRIO_EVENT + CRIO_LOADED, True, id="event-then-load"),
        pytest.param(CRIO_LOADED + CRIO_EVENT, False, id="load-before-the-event"),
        pytest.param("\n===== start 2 =====\n" + CRIO_LOADED, True, id="load-at-start"),
        pytest.param(CRIO_EVENT.replace("10-e2e.conflist", "10-e2e.tmp"), False, id="tmp-file"),
    ],
)
def test_crio_conf_loaded(after_mark: str, loaded: bool) -> None:
    before = CRIO_EVENT + CRIO_LOADED  # an older write's, before the mark
    row = runtimes.BY_KEY["cri-o-1.36"]
    mark = row.conf_mark(before)
    assert row.conf_loaded(lambda: "", lambda: before + after_mark, mark, "gen-2") is loaded


@pytest.mark.parametrize(
    ("key", "version", "cri_plugin"),
    [
        pytest.param("containerd-1.6", 2, "io.containerd.grpc.v1.cri", id="1.6"),
        pytest.param("containerd-1.7", 2, "io.containerd.grpc.v1.cri", id="1.7"),
        pytest.param("containerd-2.1", 3, "io.containerd.cri.v1.runtime", id="2.1"),
    ],
)
def test_containerd_configs(tmp_path: Path, key: str, version: int, cri_plugin: str) -> None:
    conf = tomllib.loads(_row(key).render_config(_paths(tmp_path)))
    assert conf["version"] == version
    assert conf["grpc"]["address"] == str(tmp_path / "cri.sock")
    assert conf["state"] == str(tmp_path / "run" / "s")  # volatile: a reboot wipes it
    assert conf["plugins"][cri_plugin]["cni"]["conf_dir"] == str(tmp_path / "net.d")


def test_crio_config_keeps_everything_under_the_node(tmp_path: Path) -> None:
    row = _row("cri-o-1.36")
    conf = tomllib.loads(row.render_config(_paths(tmp_path)))
    assert conf["crio"]["api"]["listen"] == str(tmp_path / "cri.sock")
    assert conf["crio"]["runtime"]["pinns_path"] == "/opt/pinns"
    assert conf["crio"]["network"]["plugin_dirs"] == [str(tmp_path / "bin")]
    paths = [v for table in conf["crio"].values() if isinstance(table, dict)
             for v in table.values() if isinstance(v, str) and v.startswith("/")]
    paths += [v for v in conf["crio"].values() if isinstance(v, str) and v.startswith("/")]
    outside = [p for p in paths if not p.startswith((str(tmp_path), "/usr/", "/opt/"))]
    assert outside == [], outside
    assert row.argv(tmp_path / "runtime.conf")[-2:] == ["--config-dir",
                                                        str(tmp_path / "crio" / "conf.d")]
