"""cni_delguard/ops/assess/probe.py through `examine`, in-process, on node roots of each kind
of chain (tests/support/assessroot.py), wrapped and not: what sits behind the guard, the runtime
as the user gives it or as the node's dpkg database says, and the rules of reading a node:
nothing is executed, no process's file is read, no node path leaves the root."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cni_delguard.host.root import NodeRoot
from cni_delguard.ops import assess
from cni_delguard.ops.assess import chains, probe, report
from cni_delguard.tooling import UsageError
from tests.support import assessroot


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
    assert tuple(doc["behind"]["plugins"]) == chain.plugins
    if chain.name == "thick-auto":
        assert doc["behind"]["multusConfigFile"] == "auto"
        assert any("read as" in n for n in doc["notes"])  # /host/... found in the conf dir
    if chain.name == "thin-name":
        assert doc["status"] == "unmeasured"
        assert "ran no chain of this kind" in doc["unmeasuredBecause"]


@pytest.mark.parametrize(
    ("given", "said", "source"),
    [
        pytest.param("v4.3.0", "v4.3.0", "--multus-version", id="given"),
        pytest.param(None, None, None, id="unknown"),
    ],
)
def test_multus_version_is_given_or_unknown(tmp_path: Path, given: str | None,
                                            said: str | None, source: str | None) -> None:
    assessroot.write(tmp_path, assessroot.BY_NAME["thin-inline"], True)
    doc = assess.examine(str(tmp_path), multus_version=given).as_json()
    assert (doc["behind"]["multusVersion"], doc["behind"]["multusVersionFrom"]) == (said, source)


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


def stanza(package: str, version: str, status: str = "install ok installed") -> str:
    return f"Package: {package}\nStatus: {status}\nArchitecture: amd64\nVersion: {version}\n"


@pytest.mark.parametrize(
    ("status", "name", "version", "range_"),
    [
        pytest.param([stanza("containerd", "1.6.20~ds1-1+deb12u1")], "containerd", "1.6.20~ds1",
                     "containerd-before-boundary", id="debian-containerd"),
        pytest.param([stanza("containerd.io", "1.7.22-1")], "containerd", "1.7.22",
                     "containerd-before-boundary", id="docker-containerd.io"),
        pytest.param([stanza("cri-o", "1.36.3-1.1")], "cri-o", "1.36.3", "cri-o", id="cri-o"),
        pytest.param([stanza("containerd", "1:2.1.6-1")], "containerd", "2.1.6",
                     "containerd-after-boundary", id="an-epoch"),
        pytest.param([stanza("bash", "5.2.15-2"), stanza("containerd", "1.6.20~ds1-1",
                                                         "deinstall ok config-files")],
                     None, None, None, id="removed-package"),
        pytest.param([], None, None, None, id="no-runtime-package"),
    ],
)
def test_the_runtime_from_its_debian_package(tmp_path: Path, status: list[str],
                                             name: str | None, version: str | None,
                                             range_: str | None) -> None:
    assessroot.write(tmp_path, assessroot.BY_NAME["plain"], True)
    dpkg = tmp_path / "var/lib/dpkg"
    dpkg.mkdir(parents=True)
    (dpkg / "status").write_text("\n".join(status))
    doc = assess.examine(str(tmp_path)).as_json()
    assert (doc["runtime"] or {}).get("name") == name
    assert (doc["runtime"] or {}).get("version") == version
    assert (doc["range"] or {}).get("name") == range_
    if name is None:
        assert any("/var/lib/dpkg/status" in t for t in doc["runtimeTried"])


def test_no_runtime_is_unmeasured_and_says_how_to_give_it(tmp_path: Path) -> None:
    assessroot.write(tmp_path, assessroot.BY_NAME["plain"], True)
    seen = assess.examine(str(tmp_path))
    assert seen.as_json()["status"] == "unmeasured"
    assert "the runtime was not found" in seen.summary()
    assert "--runtime NAME://VERSION" in seen.summary()  # what the installer's pod can do


@pytest.mark.parametrize("bad", ["containerd", "containerd://", "://2.1.6",
                                 "containerd://2.1.6; rm -rf /", "containerd://" + "9" * 65])
def test_a_runtime_given_that_is_not_one_is_refused(bad: str) -> None:
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


# --- reading a node: the rules --------------------------------------------------------------


def process(root: Path, pid: int, comm: str, exe: Path, *argv: str) -> Path:
    """A process in the root's /proc as the kernel shows it: comm, exe, cmdline and its root
    (here a directory of its own, as a container's is)."""
    proc = root / "proc" / str(pid)
    (proc / "root").mkdir(parents=True)
    (proc / "comm").write_text(comm + "\n")
    (proc / "cmdline").write_bytes(b"\0".join(a.encode() for a in (str(exe), *argv)) + b"\0")
    (proc / "exe").symlink_to(exe)
    return proc / "root"


def test_no_node_binary_is_executed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Binaries named as the runtimes and multus, where their packages put them, in the bin dir
    and as running processes' executables: assess runs none of them (each would leave a mark),
    and starts no process at all (every way to start one fails the test)."""
    root = tmp_path / "node"
    assessroot.write(root, assessroot.BY_NAME["thick-auto"], True)
    mark = tmp_path / "ran"
    trap = f"#!/bin/sh\necho \"$0\" >> {mark}\necho 'containerd x v1.7.22 x'\n"
    for where in ("usr/bin/containerd", "usr/bin/crio", "opt/cni/bin/multus-shim",
                  "usr/local/bin/multus-daemon"):
        path = root / where
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(trap)
        path.chmod(0o755)
    process(root, 41, "containerd", root / "usr/bin/containerd")
    process(root, 42, "multus-daemon", root / "usr/local/bin/multus-daemon")

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"assess started a process: {args!r}")

    for name in ("execv", "execve", "execvp", "execvpe", "posix_spawn", "posix_spawnp",
                 "fork", "system", "popen"):
        monkeypatch.setattr(os, name, refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    doc = assess.examine(str(root)).as_json()
    monkeypatch.undo()
    assert not mark.exists()
    assert doc["runtime"] is None and doc["behind"]["multusVersion"] is None


def test_no_process_file_is_read(tmp_path: Path) -> None:
    """A multus daemon naming its config by `-config`, one inside its own root and one that
    climbs out of it: assess reads neither (nor any /proc file), so no path a process names can
    take it off the node; the daemon config under the conf dir alone counts."""
    root = tmp_path / "node"
    assessroot.write(root, assessroot.BY_NAME["thick-auto"], True)
    (root / "etc/cni/net.d/multus.d/daemon-config.json").unlink()
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "daemon-config.json").write_text(json.dumps({"multusConfigFile": "LEAKED"}))
    # /proc/6/root/../../../.. is tmp_path: a plain join would read the secret
    for pid, config in ((6, "/../../../../secret/daemon-config.json"),
                        (7, "/etc/multus/daemon-config.json")):
        inside = process(root, pid, "multus-daemon", Path("/usr/bin/multus-daemon"), "-config",
                         config)
        (inside / "etc/multus").mkdir(parents=True)
        (inside / "etc/multus/daemon-config.json").write_text(json.dumps(
            {"multusConfigFile": "/etc/x.conf"}))
    doc = assess.examine(str(root)).as_json()
    assert doc["behind"]["multusConfigFile"] is None
    assert any("multusConfigFile unknown" in n for n in doc["notes"])


@pytest.mark.parametrize(
    ("path", "read"),
    [
        pytest.param("/etc/x.json", "node", id="plain"),
        pytest.param("/../../../etc/x.json", "node", id="dotdot-stops-at-the-root"),
        pytest.param("/a/link/x.json", "node-target", id="a-link-resolves-inside"),
        pytest.param("etc/x.json", None, id="not-absolute"),
    ],
)
def test_a_node_file_is_read_inside_the_root(tmp_path: Path, path: str, read: str | None) -> None:
    """Beside the root sits a file of the same name: only the node's is ever read."""
    root = tmp_path / "node"
    for where, said in ((root / "etc", "node"), (root / "target", "node-target"),
                        (tmp_path / "etc", "host"), (tmp_path / "target", "host-target")):
        where.mkdir(parents=True)
        (where / "x.json").write_text(json.dumps({"said": said}))
    (root / "a").mkdir()
    (root / "a/link").symlink_to("/target")  # absolute: the node's /target, not the host's
    got = probe.read_json(NodeRoot(str(root)), path)
    assert (got or {}).get("said") == read
