"""`cni-delguard doctor` on fake node roots: every problem planted, `--repair` checked file by
file, and a healthy node reported healthy."""

from __future__ import annotations

import fcntl
import io
import json
import os
import shlex
import time
from pathlib import Path

import pytest

from cni_delguard import cli
from cni_delguard.host import dirs, layouts
from cni_delguard.ops import doctor
from tests.support.fakes import install_fake
from tests.support.noderoot import VERSION_ANSWER, shell_plugin, with_shell
from tests.support.nodestate import libcni_result, log_lines, marker

# Times of planted files are taken when a test runs, never at import: a suite collects this
# module minutes before it runs it, and "10 s ago" would have become an ADD that died.
OLD = time.time() - 3600  # older than the ADD timeout (180 s) and caches.SETTLE_SECONDS


class FakeNode:
    def __init__(self, root: Path, wrapped: bool = True) -> None:
        self.root = root
        self.conf_dir = root / "etc/cni/net.d"
        self.bin = root / "opt/cni/bin"
        self.state = root / "var/lib/cni/delguard"
        self.results = root / "var/lib/cni/results"
        self.multus = root / "var/lib/cni/multus"
        self.log = root / "var/log/cni-delguard/delguard.log"
        for d in (self.conf_dir, self.bin, self.results, self.multus):
            d.mkdir(parents=True)
        self.state.mkdir(parents=True, mode=0o700)
        multus = {"cniVersion": "1.0.0", "name": "multus-cni-network", "type": "multus",
                  "kubeconfig": "/etc/cni/net.d/multus.d/multus.kubeconfig"}
        conf = ({"cniVersion": "1.0.0", "name": "multus-cni-network", "type": "cni-delguard",
                 "delegate": multus} if wrapped else multus)
        (self.conf_dir / "00-multus.conf").write_text(json.dumps(conf))
        (self.conf_dir / "10-ovn.conflist").write_text("{}")
        # doctor runs the guard with the node's root as /: a plugin that runs there
        with_shell(root)
        shell_plugin(self.bin / "cni-delguard", VERSION_ANSWER)
        install_fake(self.bin, "multus")

    def doctor(self, *extra: str) -> tuple[int, dict]:
        out, err = io.BytesIO(), io.StringIO()
        code = cli.main(["doctor", "--root", str(self.root), "--json", *extra], {},
                        io.BytesIO(), out, err)
        assert err.getvalue() == ""
        return code, json.loads(out.getvalue())

    def text(self, *extra: str) -> tuple[int, str]:
        out = io.BytesIO()
        code = cli.main(["doctor", "--root", str(self.root), *extra], {}, io.BytesIO(), out,
                        io.StringIO())
        return code, out.getvalue().decode()


def problems(report: dict) -> list[tuple[str, str]]:
    return [(f["check"], Path(f["path"]).name if f["path"] else "")
            for f in report["findings"] if f["severity"] == "problem"]


def old(path: Path) -> Path:
    os.utime(path, (OLD, OLD))
    return path


@pytest.fixture
def default_dirs() -> None:
    """Keep the guard's real defaults (conftest points them into tmp_path): doctor takes them
    under --root, as on a node whose conf sets none."""


@pytest.fixture
def node(tmp_path: Path) -> FakeNode:
    return FakeNode(tmp_path / "node")


def test_a_healthy_node_reports_healthy(node):
    marker(node.state, "multus-cni-network", "c1", "completed", time.time() - 60)
    libcni_result(node.results, "multus-cni-network", "c1")
    (node.multus / "c1").write_text("{}")
    marker(node.state, "multus-cni-network", "c2", "attempted", time.time() - 10)  # running now
    log_lines(node.log, [{"command": "DEL", "decision": "skip"}])
    code, report = node.doctor()
    assert (code, report["healthy"], problems(report)) == (0, True, [])
    checks = {f["check"] for f in report["findings"] if f["severity"] == "ok"}
    assert checks == {"conf", "plugins", "state"}
    code, text = node.text()
    assert code == 0 and text.rstrip().endswith("healthy")


def test_every_problem_is_found_and_repair_fixes_only_the_safe_ones(node):
    net = "multus-cni-network"
    stale = marker(node.state, net, "stale", "attempted", OLD, pod={"namespace": "ns1",
                                                                    "name": "web-0"})
    corrupt = node.state / "networks" / net / "torn:eth0.json"
    corrupt.write_bytes(b"{\"sta")
    orphan = node.state / "networks" / net / "gone:eth0.lock"
    orphan.touch()
    held = node.state / "networks" / net / "busy:eth0.lock"
    held.touch()
    completed = marker(node.state, net, "live", "completed", time.time() - 60)
    valid = libcni_result(node.results, net, "live")
    (node.multus / "live").write_text("{}")
    multus_only = node.multus / "failedadd"
    multus_only.write_text("{}")
    empty = node.results / f"{net}-crashed-eth0"
    empty.write_bytes(b"")
    foreign = node.results / f"{net}-foreign-eth0"
    foreign.write_text('{"kind": "somethingElse"}')
    old(empty), old(foreign)
    young = node.results / f"{net}-writing-eth0"
    young.write_text('{"kind": "cniCacheV1", "resu')
    log_lines(node.log, [{"ts": "2026-11-25T10:00:00Z", "command": "DEL",
                          "decision": "forward-lenient", "network": net, "containerID": "c9",
                          "ifname": "eth0", "pod": "ns1/web-0",
                          "delegateError": {"code": 7, "msg": "server_socket is required"}}])
    before = {p: p.read_bytes() for p in (stale, corrupt, completed, valid, multus_only)}

    fd = os.open(held, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        code, report = node.doctor()
        assert code == 1 and not report["healthy"]
        assert sorted(problems(report)) == sorted([
            ("markers", "stale:eth0.json"),
            ("markers", "torn:eth0.json"),
            ("locks", "gone:eth0.lock"),
            ("multus", "failedadd"),
            ("libcni", empty.name),
            ("libcni", foreign.name),
            ("libcni", young.name),
        ])
        infos = [f["message"] for f in report["findings"] if f["severity"] == "info"]
        assert any("busy:eth0: held by an operation" in m for m in infos)
        assert any("c9 eth0 pod ns1/web-0: delegate error 7: server_socket" in m for m in infos)
        stale_msg = next(f["message"] for f in report["findings"] if f["path"] == str(stale))
        assert "ns1/web-0" in stale_msg and "never completed" in stale_msg
        assert orphan.exists() and empty.exists()  # without --repair nothing changes

        code, report = node.doctor("--repair")
    finally:
        os.close(fd)
    assert code == 1  # the stale and corrupt markers, the multus sandbox and the young file stay
    repaired = {Path(f["path"]).name: f["repaired"] for f in report["findings"] if f["repaired"]}
    quarantine = node.state / "quarantine"
    assert set(repaired) == {"gone:eth0.lock", empty.name, foreign.name}
    assert repaired["gone:eth0.lock"] == "removed"
    # File by file: the orphaned lock is gone, the invalid caches moved (not deleted, bytes kept)
    assert not orphan.exists()
    assert not empty.exists() and not foreign.exists()
    moved = {p.name.rsplit(".", 1)[0]: p for p in quarantine.iterdir()}
    assert set(moved) == {empty.name, foreign.name}
    assert moved[empty.name].read_bytes() == b""
    assert moved[foreign.name].read_text() == '{"kind": "somethingElse"}'
    assert repaired[empty.name] == f"moved to {moved[empty.name]}"
    assert repaired[foreign.name] == f"moved to {moved[foreign.name]}"
    assert (quarantine.stat().st_mode & 0o777) == 0o700
    # ... and nothing else was touched: markers, the valid result, the held lock, the young file
    assert {p: p.read_bytes() for p in before} == before
    assert held.exists() and young.exists() and multus_only.exists()
    code, report = node.doctor()  # the busy lock's holder has gone: now it is orphaned
    assert sorted(problems(report)) == sorted([
        ("markers", "stale:eth0.json"), ("markers", "torn:eth0.json"),
        ("multus", "failedadd"), ("libcni", young.name), ("locks", "busy:eth0.lock"),
    ])


def test_a_wrapped_conflist_with_its_own_dirs(tmp_path):
    node = FakeNode(tmp_path / "node")
    (node.conf_dir / "00-multus.conf").unlink()
    state, results = "/srv/dg-state", "/srv/libcni"
    guard = {"type": "cni-delguard", "stateDir": state, "resultCacheDirs": [results],
             "multusCacheDirs": ["/srv/multus"], "timeouts": {"add": 30},
             "delegate": {"type": "multus"}}
    (node.conf_dir / "05-net.conflist").write_text(json.dumps(
        {"cniVersion": "1.0.0", "name": "net", "plugins": [guard, {"type": "portmap"}]}))
    (node.root / "srv/dg-state").mkdir(parents=True, mode=0o700)
    marker(node.root / "srv/dg-state", "net", "c1", "attempted", time.time() - 60)  # > 30 s
    (node.root / "srv/multus").mkdir()
    (node.root / "srv/multus/c2").write_text("{}")
    (node.root / "srv/libcni").mkdir()
    (node.root / "srv/libcni/net-c3-eth0").write_bytes(b"")
    code, report = node.doctor()
    assert code == 1
    assert sorted(problems(report)) == [
        ("libcni", "net-c3-eth0"), ("markers", "c1:eth0.json"), ("multus", "c2")
    ]


def test_unwrapped_conf_missing_plugins_and_unsafe_state_dir(tmp_path):
    node = FakeNode(tmp_path / "node", wrapped=False)
    code, report = node.doctor()
    assert code == 1
    assert problems(report) == [("conf", "00-multus.conf")]
    assert "is not wrapped by cni-delguard" in report["findings"][0]["message"]

    node = FakeNode(tmp_path / "node2")
    (node.bin / "cni-delguard").unlink()
    (node.bin / "multus").unlink()
    node.state.chmod(0o777)
    code, report = node.doctor()
    assert code == 1
    assert problems(report) == [("plugins", "cni-delguard"), ("plugins", "multus"),
                                ("state", "delguard")]
    assert any("writable by group or others" in f["message"] for f in report["findings"])


def test_a_delegate_linked_by_its_absolute_path_is_found_under_the_root(node):
    """/opt/cni/bin/multus -> /usr/lib/cni/multus, as the node has it: from a pod that sees the
    node at --root, the link's target is under the root, not in the pod's own /."""
    real = node.root / "usr/lib/cni"
    real.mkdir(parents=True)
    (node.bin / "multus").rename(real / "multus")
    (node.bin / "multus").symlink_to("/usr/lib/cni/multus")
    code, report = node.doctor()
    assert (code, problems(report)) == (0, []), report
    (real / "multus").unlink()
    code, report = node.doctor()
    assert (code, problems(report)) == (1, [("plugins", "multus")])


def test_a_delegate_linked_out_of_the_pods_mounts_is_not_called_missing(node):
    """The installer's pod mounts the node's CNI dirs alone: /opt/cni/bin/bridge ->
    /usr/lib/cni/bridge (Debian's package) points at a dir the pod does not have. doctor says it
    cannot see it from there (info, exit 0), not that every ADD will fail (seen on a cluster:
    `kubectl exec ... doctor --root /host` exited 1 on a healthy node)."""
    (node.bin / "multus").unlink()
    (node.bin / "multus").symlink_to("/usr/lib/cni/multus")
    code, report = node.doctor()
    assert (code, problems(report)) == (0, []), report
    (said,) = [f for f in report["findings"] if "/usr/lib/cni/multus" in f["message"]]
    assert said["severity"] == "info" and "check it on the node" in said["message"]
    (node.root / "usr/lib/cni").mkdir(parents=True)  # the dir is there: the plugin is missing
    code, report = node.doctor()
    assert (code, problems(report)) == (1, [("plugins", "multus")])


def test_a_guard_that_does_not_run_and_a_conf_that_is_not_json(tmp_path):
    node = FakeNode(tmp_path / "node")
    guard = node.bin / "cni-delguard"
    guard.unlink()
    guard.write_text("#!/bin/false\n")
    guard.chmod(0o755)
    code, report = node.doctor()
    assert ("plugins", "cni-delguard") in problems(report)
    (node.conf_dir / "00-multus.conf").write_text("{not json")
    code, report = node.doctor()
    assert code == 1
    assert problems(report)[0] == ("conf", "00-multus.conf")
    assert "not valid JSON" in report["findings"][0]["message"]


def test_usage_errors_exit_2(tmp_path):
    out, err = io.BytesIO(), io.StringIO()
    assert cli.main(["doctor", "--root", str(tmp_path / "none")], {}, io.BytesIO(), out, err) == 2
    assert cli.main(["doctor", "--bogus"], {}, io.BytesIO(), out, err) == 2
    tmp_path.joinpath("root").mkdir()
    argv = ["doctor", "--root", str(tmp_path / "root"), "--conf-dir", "etc/cni/net.d"]
    err = io.StringIO()
    assert cli.main(argv, {}, io.BytesIO(), out, err) == 2
    assert err.getvalue() == "cni-delguard doctor: 'etc/cni/net.d' must be an absolute path\n"


def test_network_dirs_every_tool_skips_are_reported(node, tmp_path):
    nets = node.state / "networks"
    marker(node.state, "multus-cni-network", "c1", "completed", time.time() - 60)
    (tmp_path / "elsewhere").mkdir()
    (nets / "linked").symlink_to(tmp_path / "elsewhere")
    (nets / "open").mkdir(mode=0o700)
    (nets / "open").chmod(0o777)
    (nets / "not a name").mkdir(mode=0o700)
    code, report = node.doctor()
    found = {Path(f["path"]).name: (f["severity"], f["message"])
             for f in report["findings"] if f["check"] == "networks"}
    assert found == {
        "linked": ("problem", "network dir linked: a symlink or not a directory; list, release, "
                   "GC and metrics skip it, and every ADD of that network fails until it is fixed"),
        "open": ("problem", "network dir open: writable by group or others (mode 777); list, "
                 "release, GC and metrics skip it, and every ADD of that network fails until it "
                 "is fixed"),
        "not a name": ("info", "'not a name' in networks: not a network name the guard writes; "
                       "skipped by every tool"),
    }
    assert code == 1


def test_an_unusable_networks_dir_is_a_state_problem(node, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (node.state / "networks").symlink_to(tmp_path / "elsewhere")
    code, report = node.doctor()
    assert problems(report) == [("state", "networks")]
    assert code == 1


def test_the_confs_paths_are_read_as_the_guard_reads_them(tmp_path):
    """Normalized before they meet --root (`/../srv/dg` is /srv/dg under the root, never a dir
    beside it), and the defaults for what the guard would not take (a NUL, a relative path)."""
    node = FakeNode(tmp_path / "node")
    conf = json.loads((node.conf_dir / "00-multus.conf").read_text())
    conf |= {"stateDir": "/../srv/x/../dg", "resultCacheDirs": ["/../srv/libcni", "rel"],
             "logFile": "/var/log/\u0000x"}
    (node.conf_dir / "00-multus.conf").write_text(json.dumps(conf))
    found = doctor.discover(dirs.of_layout(str(node.root), layouts.STANDARD))
    assert found.state_dir == str(node.root / "srv/dg")
    assert found.node_state_dir == "/srv/dg"
    assert found.result_dirs == (str(node.root / "srv/libcni"),)
    assert found.log_file == str(node.root / "var/log/cni-delguard/delguard.log")


def test_checks_are_independent_functions():
    # The lead adds issue 14's check with one line: each is node -> findings.
    assert all(callable(c) for c in doctor.CHECKS)
    assert len(set(doctor.CHECKS)) == len(doctor.CHECKS)


def test_a_strict_del_failing_for_long_is_listed_with_the_release_command_that_frees_it(node):
    """A completed ADD whose delegate keeps failing DEL: doctor names it, with the exact
    `release` command; run as printed (through cli.main), it releases that attachment only."""
    net = "multus-cni-network"
    marker(node.state, net, "stuck1", "completed", OLD, pod={"namespace": "ns1", "name": "db-0"})
    marker(node.state, net, "other", "completed", OLD)
    error = {"code": 999, "msg": "server_socket is required in cni.conf"}
    failing = {"command": "DEL", "decision": "forward-strict", "network": net,
               "containerID": "stuck1", "ifname": "eth0", "pod": "ns1/db-0", "error": error}
    stamps = [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)) for t in (OLD, time.time() - 60)]
    log_lines(node.log, [{**failing, "ts": ts} for ts in stamps])
    code, report = node.doctor()
    [found] = [f for f in report["findings"] if f["check"] == "stuck"]
    assert code == 1 and found["severity"] == "problem"
    assert "ns1/db-0" in found["message"] and "server_socket is required" in found["message"]
    command = found["message"].split("accept the leak with: ", 1)[1]
    argv = shlex.split(command)
    assert argv[:2] == ["cni-delguard", "release"] and "--root" in argv
    out, err = io.BytesIO(), io.StringIO()
    assert cli.main(argv[1:], {}, io.BytesIO(), out, err) == 0, err.getvalue()
    released = sorted(p.name for p in (node.state / "networks" / net).glob("*.release"))
    assert released == ["stuck1:eth0.release"]


def test_a_strict_del_that_failed_once_recently_is_not_stuck(node):
    net = "multus-cni-network"
    marker(node.state, net, "blip", "completed", time.time() - 60)
    ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 30))
    log_lines(node.log, [{"ts": ts, "command": "DEL", "decision": "forward-strict",
                          "network": net, "containerID": "blip", "ifname": "eth0",
                          "error": {"code": 11, "msg": "timed out"}}])
    _, report = node.doctor()
    assert [f for f in report["findings"] if f["check"] == "stuck"] == []


def test_multus_thick_with_results_and_an_empty_multus_cache_is_warned_about(node):
    """Thick's cniDir is in its daemon config, not the conf: results with no multus cache entry
    mean the guard probably looks in the wrong dir (--multus-cache-dir)."""
    conf = json.loads((node.conf_dir / "00-multus.conf").read_text())
    conf["delegate"]["type"] = "multus-shim"
    (node.conf_dir / "00-multus.conf").write_text(json.dumps(conf))
    install_fake(node.bin, "multus-shim")
    _, report = node.doctor()
    assert not [f for f in report["findings"] if "multus thick" in f["message"]]  # no sandbox
    libcni_result(node.results, "multus-cni-network", "c1")
    _, report = node.doctor()
    (warned,) = [f for f in report["findings"] if "multus thick" in f["message"]]
    assert warned["severity"] == "info" and "--multus-cache-dir" in warned["message"]
    (node.multus / "c1").write_text("{}")
    _, report = node.doctor()
    assert not [f for f in report["findings"] if "multus thick" in f["message"]]
