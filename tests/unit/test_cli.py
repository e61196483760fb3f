"""The plugin run in-process through cli.main: what the runtime sees, and whether the delegate
was called, for every case of the DEL decision table and for ADD/CHECK/GC/STATUS/VERSION."""

from __future__ import annotations

import io
import json
import os

import pytest

from cni_delguard import cli
from cni_delguard.cni import errors
from tests.support.records import fake_calls


def test_version_reads_no_stdin(node):
    class Exploding(io.BytesIO):
        def read(self, *a):  # pragma: no cover - reaching it fails the test
            raise AssertionError("VERSION read stdin")

    out = io.BytesIO()
    assert cli.main([], {"CNI_COMMAND": "VERSION"}, Exploding(), out, io.StringIO()) == 0
    assert json.loads(out.getvalue())["supportedVersions"] == [
        "0.3.0",
        "0.3.1",
        "0.4.0",
        "1.0.0",
        "1.1.0",
    ]


def test_del_without_any_evidence_skips_the_delegate(node):
    code, out = node.run("DEL", node.conf())
    assert (code, out) == (0, None)
    assert node.calls() == []
    [rec] = node.decisions()
    assert rec["decision"] == "skip" and rec["evidence"] == [] and rec["containerID"] == "c1"
    assert not node.state.exists() or node.state_files() == []


def test_add_then_del_forwards_both_and_leaves_nothing(node):
    code, out = node.run("ADD", node.conf())
    assert code == 0 and out["cniVersion"] == "1.0.0"
    assert node.state_files() == ["c1:eth0.json", "c1:eth0.lock"]
    marker = json.loads((node.state / "networks/net1/c1:eth0.json").read_text())
    assert marker["state"] == "completed"
    assert node.run("DEL", node.conf()) == (0, None)
    assert node.calls() == ["ADD", "DEL"]
    assert node.state_files() == []
    assert node.decisions()[-1]["decision"] == "forward-strict"
    assert node.run("DEL", node.conf()) == (0, None)  # a second DEL: nothing left, success
    assert node.calls() == ["ADD", "DEL"]


def test_interrupted_add_then_failing_delegate_del_is_swallowed(node):
    """The deadlock breaker: only our attempted marker, the delegate has no state and fails."""
    node.run("ADD", node.conf())
    (node.fake_state / "c1:eth0").unlink()  # the delegate never got its state
    marker = node.state / "networks/net1/c1:eth0.json"
    marker.write_text(json.dumps({"state": "attempted"}))
    assert node.run("DEL", node.conf()) == (0, None)
    assert node.calls() == ["ADD", "DEL"]
    rec = node.decisions()[-1]
    assert rec["decision"] == "forward-lenient"
    assert rec["delegateError"]["msg"] == "server_socket is required in cni.conf"
    assert node.state_files() == []
    assert node.run("DEL", node.conf()) == (0, None)
    assert node.calls() == ["ADD", "DEL"]


@pytest.mark.parametrize("evidence", ["completed-marker", "libcni-cache", "prevResult"])
def test_failing_delegate_del_after_completed_add_is_propagated(node, evidence):
    node.run("ADD", node.conf())
    (node.fake_state / "c1:eth0").unlink()
    conf = node.conf()
    if evidence != "completed-marker":
        (node.state / "networks/net1/c1:eth0.json").unlink()
    if evidence == "libcni-cache":
        node.libcni_cache()
    if evidence == "prevResult":
        conf["prevResult"] = {"cniVersion": "1.0.0", "ips": []}
    code, out = node.run("DEL", conf)
    assert code == 1
    assert out == {
        "cniVersion": "1.0.0",
        "code": 7,
        "msg": "server_socket is required in cni.conf",
        "details": "",
    }
    assert node.decisions()[-1]["decision"] == "forward-strict"


def test_multus_cache_alone_forwards_leniently(node):
    # multus saved its cache, then its delegate's ADD failed, before the guard was installed.
    (node.multus / "c1").write_text("{}")
    assert node.run("DEL", node.conf()) == (0, None)
    assert node.calls() == ["DEL"]
    rec = node.decisions()[-1]
    assert (rec["decision"], rec["evidence"]) == ("forward-lenient", ["multus-cache", "lock"])
    assert rec["delegateError"]["msg"] == "server_socket is required in cni.conf"


@pytest.mark.parametrize(
    "body",
    [b"", b'{"kind": "cniCacheV1", "containerId": "c1", "res', b'{"kind": "cniCacheV1"}',
     b'{"kind": "other", "result": {}}', b'{"kind": "cniCacheV1", "result": null}', b"\xff\xfe"],
    ids=["empty", "torn", "no-result", "other-kind", "null-result", "not-utf8"],
)
def test_an_invalid_libcni_cache_is_at_most_attempted(node, body):
    node.libcni_cache(body=body)
    assert node.run("DEL", node.conf()) == (0, None)
    assert node.calls() == ["DEL"]
    rec = node.decisions()[-1]
    assert rec["decision"] == "forward-lenient"
    assert rec["evidence"] == ["libcni-cache-invalid", "lock"]


def test_a_valid_libcni_cache_beats_an_invalid_one_in_another_dir(node, tmp_path):
    other = tmp_path / "other-results"
    other.mkdir()
    (other / "net1-c1-eth0").write_bytes(b"")
    node.libcni_cache()
    code, out = node.run("DEL", node.conf(resultCacheDirs=[str(other), str(node.results)]))
    assert code == 1 and out["code"] == 7
    rec = node.decisions()[-1]
    assert rec["decision"] == "forward-strict"
    assert rec["evidence"] == ["libcni-cache", "libcni-cache-invalid", "lock"]


def test_a_symlink_where_libcni_caches_is_not_followed(node, tmp_path):
    real = tmp_path / "elsewhere"
    real.write_bytes(node.libcni_cache().read_bytes())
    (node.results / "net1-c1-eth0").unlink()
    (node.results / "net1-c1-eth0").symlink_to(real)
    assert node.run("DEL", node.conf()) == (0, None)
    assert node.decisions()[-1]["evidence"] == ["libcni-cache-invalid", "lock"]


@pytest.mark.parametrize(
    "stdin",
    [
        b"{not json",
        b"[]",
        json.dumps({"cniVersion": "9.9.9", "name": "net1"}).encode(),
        json.dumps({"cniVersion": "1.0.0", "name": "net1", "type": "cni-delguard"}).encode(),
    ],
    ids=["garbage", "not-an-object", "unknown-version", "no-delegate"],
)
def test_broken_config_del_without_evidence_still_succeeds(node, stdin):
    assert node.run("DEL", stdin) == (0, None)
    assert node.calls() == []


def test_invalid_config_del_with_evidence_reports_the_config_error(node):
    node.libcni_cache()
    code, out = node.run("DEL", node.conf(lockTimeout="soon"))
    assert code == 1 and out["code"] == errors.INVALID_CONFIG
    assert node.calls() == []


def test_unparseable_config_looks_for_evidence_in_the_default_dirs(node, default_dirs):
    # Without a config there is no way to know the configured dirs: what is in them is not seen.
    (node.multus / "c1").write_text("{}")
    assert node.run("DEL", b"{not json") == (0, None)
    assert node.decisions() == []  # the decision went to the default log
    assert json.loads((default_dirs / "delguard.log").read_text())["decision"] == "skip"
    # Evidence in the default multus dir: the DEL cannot be forwarded, so the error is reported.
    (default_dirs / "multus").mkdir()
    (default_dirs / "multus" / "c1").write_text("{}")
    code, out = node.run("DEL", b"{not json")
    assert code == 1 and out["code"] == errors.DECODING_FAILURE


def test_missing_delegate_binary_del_without_evidence_succeeds(node):
    (node.bin / "stale-delegate").unlink()
    assert node.run("DEL", node.conf()) == (0, None)


def test_missing_delegate_fails_add_before_any_marker(node):
    (node.bin / "stale-delegate").unlink()
    code, out = node.run("ADD", node.conf())
    assert code == 1 and out["code"] == errors.DELEGATE_NOT_FOUND
    assert node.state_files() == []


def test_failed_add_returns_the_delegates_error_and_cleans_up(node):
    code, out = node.run("ADD", node.conf(delegate={"failAdd": 42}))
    assert code == 1
    assert out == {
        "cniVersion": "1.0.0",
        "code": 42,
        "msg": "fake delegate: ADD refused",
        "details": "",
    }
    # The spec asks a delegating plugin to DEL its delegate after a failed ADD; the fake has no
    # state so that DEL fails, and the attempted marker stays for the runtime's own DEL.
    assert node.calls() == ["ADD", "DEL"]
    assert (
        json.loads((node.state / "networks/net1/c1:eth0.json").read_text())["state"] == "attempted"
    )
    assert node.run("DEL", node.conf()) == (0, None)
    assert node.state_files() == []


def test_add_timeout_kills_the_delegate_and_says_try_again(node):
    conf = node.conf(
        delegate={"hang": ["ADD"], "hangSeconds": 30},
        timeouts={"add": 0.5, "del": 5, "check": 5, "gc": 5, "status": 5},
    )
    code, out = node.run("ADD", conf)
    assert code == 1 and out["code"] == errors.TRY_AGAIN_LATER


def test_unsupported_version_on_add_is_code_1(node):
    code, out = node.run("ADD", node.conf(version="0.2.0"))
    assert code == 1 and out["code"] == errors.INCOMPATIBLE_VERSION


def test_invalid_guard_config_on_add_is_code_7(node):
    code, out = node.run("ADD", node.conf(stateDir="relative/dir"))
    assert code == 1 and out["code"] == errors.INVALID_CONFIG
    assert "stateDir" in out["details"]


def test_check_forwards_and_needs_spec_0_4_0(node):
    node.run("ADD", node.conf())
    assert node.run("CHECK", node.conf()) == (0, None)
    assert node.calls() == ["ADD", "CHECK"]
    code, out = node.run("CHECK", node.conf(version="0.3.1"))
    assert code == 1 and out["code"] == errors.INCOMPATIBLE_VERSION


def test_gc_prunes_markers_not_listed_and_forwards(node):
    for cid in ("keep", "drop"):
        node.run("ADD", node.conf(version="1.1.0"), cid=cid)
    conf = node.conf(version="1.1.0")
    conf["cni.dev/valid-attachments"] = [{"containerID": "keep", "ifname": "eth0"}]
    assert node.run("GC", conf) == (0, None)
    assert node.state_files() == ["keep:eth0.json", "keep:eth0.lock"]
    assert node.calls()[-1] == "GC"
    last = fake_calls(node.record)[-1]
    assert last["stdin"]["cni.dev/valid-attachments"] == conf["cni.dev/valid-attachments"]


def test_gc_without_valid_attachments_prunes_nothing(node):
    node.run("ADD", node.conf(version="1.1.0"))
    assert node.run("GC", node.conf(version="1.1.0")) == (0, None)
    assert node.state_files() == ["c1:eth0.json", "c1:eth0.lock"]


def test_status_passes_through_and_fails_for_missing_delegate(node):
    assert node.run("STATUS", node.conf(version="1.1.0")) == (0, None)
    (node.bin / "stale-delegate").unlink()
    code, out = node.run("STATUS", node.conf(version="1.1.0"))
    assert code == 1 and out["code"] == errors.STATUS_NOT_AVAILABLE


def test_runtime_config_reaches_the_delegate_only_for_its_capabilities(node):
    conf = node.conf(delegate={"capabilities": {"portMappings": True}})
    conf["runtimeConfig"] = {"portMappings": [{"hostPort": 80}], "bandwidth": {"rate": 1}}
    node.run("ADD", conf)
    sent = fake_calls(node.record)[0]["stdin"]
    assert sent["runtimeConfig"] == {"portMappings": [{"hostPort": 80}]}
    assert sent["name"] == "net1" and sent["cniVersion"] == "1.0.0"
    assert sent["recordFile"] == str(node.record)  # the delegate's own keys, untouched


def test_unexpected_exceptions_become_internal_cni_errors(node, monkeypatch):
    from cni_delguard.commands import add

    def boom(*a):
        raise RuntimeError("surprise")

    monkeypatch.setattr(add, "run", boom)
    code, out = node.run("ADD", node.conf())
    assert code == 1 and out["code"] == errors.INTERNAL and "surprise" in out["details"]


def test_a_leftover_lock_file_alone_is_cleaned_and_del_succeeds(node):
    node.run("ADD", node.conf())
    net = node.state / "networks/net1"
    (net / "c1:eth0.json").unlink()
    (node.fake_state / "c1:eth0").unlink()
    assert node.state_files() == ["c1:eth0.lock"]
    assert node.run("DEL", node.conf()) == (0, None)
    assert node.state_files() == []
    assert node.calls() == ["ADD"]


def test_a_held_lock_makes_del_try_again_later_even_without_a_marker(node):
    from cni_delguard.state.locking import AttachmentLock

    net = node.state / "networks/net1"
    net.mkdir(parents=True, mode=0o700)
    for d in (node.state, node.state / "networks"):
        d.chmod(0o700)
    lock = AttachmentLock(str(net / "c1:eth0.lock"), timeout=1)
    try:
        code, out = node.run("DEL", node.conf(lockTimeout=0.2))
    finally:
        lock.release()
    assert code == 1
    assert out["code"] == errors.TRY_AGAIN_LATER


def test_a_del_interrupted_after_the_delegate_deleted_does_not_deadlock(node):
    """The guard died between the delegate's successful DEL and removing its marker: the next
    DEL finds `deleting` (and libcni's cache, which stays until a DEL succeeds) and must not
    fail because the delegate has nothing left to delete."""
    node.run("ADD", node.conf())
    (node.fake_state / "c1:eth0").unlink()  # the delegate's DEL had already run
    node.libcni_cache()
    marker = node.state / "networks/net1/c1:eth0.json"
    marker.write_text(json.dumps({"state": "deleting", "containerID": "c1", "ifname": "eth0"}))
    conf = node.conf()
    conf["prevResult"] = {"cniVersion": "1.0.0", "ips": []}
    assert node.run("DEL", conf) == (0, None)
    assert node.decisions()[-1]["decision"] == "forward-lenient"
    assert node.state_files() == []


def test_a_reported_del_failure_puts_the_completed_marker_back(node):
    node.run("ADD", node.conf())
    marker = node.state / "networks/net1/c1:eth0.json"
    before = json.loads(marker.read_text())
    code, _ = node.run("DEL", node.conf(delegate={"failDel": 42}))
    assert code == 1
    assert json.loads(marker.read_text()) == before


def _tool(*argv: str) -> tuple[int, str, str]:
    out, err = io.BytesIO(), io.StringIO()
    code = cli.main(list(argv), {}, io.BytesIO(), out, err)
    return code, out.getvalue().decode(), err.getvalue()


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--help"], id="top"),
        pytest.param(["stats", "--help"], id="stats"),
        pytest.param(["install", "--help"], id="install"),
        pytest.param(["uninstall", "-h"], id="uninstall"),
    ],
)
def test_help_goes_to_stdout_and_exits_0(argv):
    code, out, err = _tool(*argv)
    assert (code, err) == (0, "")
    assert out.startswith("usage: cni-delguard")


def test_every_command_is_in_the_top_level_help():
    _, out, _ = _tool("--help")
    for name in ("stats", "install", "uninstall", "version"):
        assert name in out


def test_no_cni_command_and_no_arguments_is_usage_not_cni_json():
    code, out, err = _tool()
    assert (code, out) == (2, "")
    assert err.startswith("usage: cni-delguard") and "CNI_COMMAND" in err


def test_a_runtime_that_forgot_cni_command_gets_cni_json_code_4():
    out = io.BytesIO()
    env = {"CNI_CONTAINERID": "c1", "CNI_IFNAME": "eth0", "CNI_NETNS": "/x", "CNI_PATH": "/b"}
    assert cli.main([], env, io.BytesIO(b"{}"), out, io.StringIO()) == 1
    reply = json.loads(out.getvalue())
    assert reply["code"] == errors.INVALID_ENV and "CNI_COMMAND" in reply["msg"]


@pytest.mark.parametrize("argv", [["bogus"], ["stats", "--no-such-option"]])
def test_a_usage_error_is_exit_2_with_the_usage_on_stderr(argv):
    code, out, err = _tool(*argv)
    assert (code, out) == (2, "")
    assert "usage: cni-delguard" in err and "error:" in err


@pytest.mark.parametrize("argv", [["--version"], ["version"]])
def test_version_is_printed_on_stdout_with_the_arch(argv):
    import platform

    from cni_delguard import __version__, buildinfo

    arch = buildinfo.ARCHES.get(platform.machine(), platform.machine())
    code, out, err = _tool(*argv)
    assert (code, err) == (0, "")
    assert out.startswith(f"cni-delguard {__version__} ({arch}; from source, Python 3.11")
    assert out.endswith(")\n") and out.count("\n") == 1


SWAPPER = """#!{python} -I
# A FAKE delegate for one test: on ADD it prints a minimal result; on DEL it moves the guard's
# <stateDir>/networks aside and puts a symlink to a decoy dir in its place, as an attacker
# racing the guard's DEL would, then succeeds.
import json, os, sys
conf = json.load(sys.stdin)
state = conf["swapState"]
if os.environ["CNI_COMMAND"] == "DEL":
    os.rename(os.path.join(state, "networks"), os.path.join(state, "moved"))
    os.symlink(conf["decoy"], os.path.join(state, "networks"))
print(json.dumps({{"cniVersion": conf["cniVersion"]}}))
"""


def test_del_unlinks_the_lock_in_the_dir_it_walked_not_through_a_swapped_link(node, tmp_path):
    """On 58a9769 the lock was opened and unlinked by its full path: `networks` swapped for a
    link while the delegate's DEL ran made the guard unlink <decoy>/net1/c1:eth0.lock."""
    import sys

    swapper = node.bin / "swapper"
    swapper.write_text(SWAPPER.format(python=sys.executable))
    swapper.chmod(0o755)
    decoy = tmp_path / "decoy"
    (decoy / "net1").mkdir(parents=True)
    (decoy / "net1" / "c1:eth0.lock").write_text("someone else's")
    conf = node.conf()
    conf["delegate"] = {"type": "swapper", "swapState": str(node.state), "decoy": str(decoy)}
    assert node.run("ADD", conf)[0] == 0
    assert node.run("DEL", conf) == (0, None)
    assert (decoy / "net1" / "c1:eth0.lock").read_text() == "someone else's"
    assert os.listdir(node.state / "moved" / "net1") == []
