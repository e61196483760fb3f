"""`cni-delguard bugreport` (cni_delguard/ops/bugreport.py): one bounded archive, no secret in it,
every node path read through --root without following a link. Against a temp node root."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile

import pytest

from cni_delguard import cli
from cni_delguard.ops import bugreport, redact
from tests.support import guard

CID = "0123456789abcdef" * 4
# Every secret the node below holds, each a string that must be in no member in any form.
SECRETS = {
    "pw": "Hunter2-plugin-password",
    "token": "tok_9f8e7d6c5b4a-vendor",
    "nested": "NestedJsonSecret-77",
    "cert": "MIIBCERTIFICATEBODYsecret",
    "key": "MIIEPRIVATEKEYBODYsecret",
    "url": "UrlPassw0rd-in-userinfo",
    "bearer": "BearerValue-4242-abc",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib2IifQ.c2lnbmF0dXJl",
    "b64": "QUtJQVlPVVJTRUNSRVRLRVlIRVJFMTIzNDU2Nzg5MA",
    "log": "LogPassword-in-a-delegate-error",
    "logkv": "kv-secret-in-the-log",
    "keyname": "value-of-a-key-named-private",
    "ipam": "ipam-vendor-api-token",
    "multus": "multus-kubeconfig-inline-token",
    "live": "heartbeat-secret-token",
    "installer": "installer-log-token-value",
}
PEM_CERT = f"-----BEGIN CERTIFICATE-----\n{SECRETS['cert']}\n-----END CERTIFICATE-----\n"
PEM_KEY = f"-----BEGIN RSA PRIVATE KEY-----\n{SECRETS['key']}\n-----END RSA PRIVATE KEY-----"

GUARDED = {
    "cniVersion": "1.0.0",
    "name": "multus-cni-network",
    "plugins": [
        {
            "type": "cni-delguard",
            "stateDir": "/var/lib/cni/delguard",
            "mode": "enforce",
            "delegate": {
                "type": "multus",
                "kubeconfig": "/etc/cni/net.d/multus.d/multus.kubeconfig",
                "delegates": [{"name": "kube-ovn", "plugins": [
                    {"type": "kube-ovn", "server_socket": "/run/openvswitch/kube-ovn-daemon.sock",
                     "token": SECRETS["multus"]}]}],
                "capabilities": {"portMappings": True},
            },
        },
        {
            "type": "vendor",
            "password": SECRETS["pw"],
            "endpoint": f"https://admin:{SECRETS['url']}@vendor.example/api",
            "settings": json.dumps({"auth": {"secret": SECRETS["nested"]}}),
            "caCert": PEM_CERT,
            "note": f"Authorization: Bearer {SECRETS['bearer']}",
            "session": SECRETS["jwt"],
            "blob": SECRETS["b64"],
            "private": SECRETS["keyname"],
            "tls": {"key": PEM_KEY},
            "ipam": {"type": "vendor-ipam", "apiToken": SECRETS["ipam"], "subnet": "10.1.0.0/16"},
            "dns": {"nameservers": ["10.96.0.10"]},
            "capabilities": {"portMappings": True},
        },
    ],
}


@pytest.fixture
def node(tmp_path):
    root = tmp_path / "node"
    net = root / "etc/cni/net.d"
    net.mkdir(parents=True)
    (root / "opt/cni/bin").mkdir(parents=True)
    (net / "00-multus.conflist").write_text(json.dumps(GUARDED))
    logs = root / "var/log/cni-delguard"
    logs.mkdir(parents=True)
    records = [
        {"ts": f"2026-11-25T10:00:{i:02d}Z", "command": "DEL", "decision": "forward-lenient",
         "network": "multus-cni-network", "containerID": CID, "ifname": "eth0",
         "delegateError": {"code": 7, "msg": f"login failed: password={SECRETS['log']}",
                           "details": json.dumps({"token": SECRETS["logkv"]})}}
        for i in range(30)
    ]
    (logs / "delguard.log").write_text("".join(json.dumps(r) + "\n" for r in records[10:]))
    (logs / "delguard.log.1").write_text("".join(json.dumps(r) + "\n" for r in records[:10]))
    state = root / "var/lib/cni/delguard/installer"
    state.mkdir(parents=True, mode=0o700)
    (state / "uninstalled").write_text("2026-11-25T09:00:00Z\n")
    live = tmp_path / "live"
    live.write_text(json.dumps({"time": 1, "problem": f"token={SECRETS['live']}"}))
    installer_log = tmp_path / "installer.log"
    installer_log.write_text(f"cni-delguard: wrapped 'multus'\nAPI_TOKEN={SECRETS['installer']}\n")
    return root, live, installer_log


def report(node, *extra, output=None):
    root, live, installer_log = node
    output = output or root.parent / "report.tar.gz"
    out, err = io.BytesIO(), io.StringIO()
    argv = ["bugreport", "--root", str(root), "--output", str(output), "--live-file", str(live),
            "--installer-log", str(installer_log), *extra]
    code = cli.main(argv, {}, io.BytesIO(), out, err)
    assert code == 0, err.getvalue()
    with tarfile.open(output) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def strings(value):
    """Every string in a JSON value, those that hold JSON opened too."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)
    elif isinstance(value, str):
        yield value
        try:
            yield from strings(json.loads(value))
        except ValueError:
            pass


def decoded(name, data):
    if name.endswith(".json"):
        return list(strings(json.loads(data)))
    if name.endswith(".jsonl"):
        return [s for line in data.splitlines() for s in strings(json.loads(line))]
    return [data.decode()]


@pytest.mark.parametrize("extra", [
    pytest.param([], id="default"),
    pytest.param(["--include-plugin-config"], id="include-plugin-config"),
])
def test_no_secret_is_in_any_member(node, extra):
    members = report(node, *extra)
    assert len(members) >= 10
    for name, data in members.items():
        texts = [data.decode("utf-8", "replace"), *decoded(name, data)]
        for what, secret in SECRETS.items():
            leaked = [t for t in texts if secret in t]
            assert not leaked, f"{what} in {name}"


def test_member_names_are_fixed_and_the_manifest_lists_them(node):
    members = report(node)
    names = sorted(n.removeprefix(bugreport.PREFIX + "/") for n in members)
    assert names == sorted(bugreport.MEMBERS)
    manifest = json.loads(members[f"{bugreport.PREFIX}/manifest.json"])
    assert set(manifest["members"]) == set(bugreport.MEMBERS) - {"manifest.json"}
    assert manifest["limits"]["totalBytes"] == bugreport.TOTAL_LIMIT


def member(members, name):
    data = members[f"{bugreport.PREFIX}/{name}"]
    return json.loads(data) if name.endswith(".json") else data


def test_plugin_fields_are_names_only_unless_asked(node):
    confs = member(report(node), "confs.json")["00-multus.conflist"]
    vendor = confs["plugins"][1]
    assert vendor["endpoint"] == redact.OMITTED
    assert vendor["ipam"] == {"type": "vendor-ipam", "apiToken": redact.REDACTED,
                              "subnet": redact.OMITTED}
    assert vendor["dns"] == {"nameservers": ["10.96.0.10"]}
    guard = confs["plugins"][0]
    assert guard["stateDir"] == "/var/lib/cni/delguard"
    assert guard["delegate"]["type"] == "multus"
    assert guard["delegate"]["delegates"] == redact.OMITTED
    assert guard["delegate"]["capabilities"] == {"portMappings": True}


def test_include_plugin_config_keeps_what_is_no_secret(node, tmp_path):
    members = report(node, "--include-plugin-config")
    guard = member(members, "guard-conf.json")["00-multus.conflist"][0]
    (inner,) = guard["delegate"]["delegates"][0]["plugins"]
    assert inner["server_socket"] == "/run/openvswitch/kube-ovn-daemon.sock"
    assert inner["token"] == redact.REDACTED
    vendor = member(members, "confs.json")["00-multus.conflist"]["plugins"][1]
    assert vendor["endpoint"] == f"https://{redact.REDACTED}@vendor.example/api"
    assert vendor["ipam"]["subnet"] == "10.1.0.0/16"


def test_the_tools_ran_and_the_log_is_its_last_records(node):
    members = report(node, "--log-records", "25")
    assert member(members, "doctor.json")["output"]["confDir"].endswith("etc/cni/net.d")
    assert member(members, "assess.json")["command"][0] == "assess"
    stats = member(members, "stats.json")
    assert stats["exitCode"] == 0 and stats["output"]["records"] == 30
    lines = member(members, "log.jsonl").splitlines()
    assert [json.loads(x)["ts"][-3:-1] for x in lines] == [f"{i:02d}" for i in range(5, 30)]
    assert json.loads(lines[0])["containerID"] == CID  # an ID is no secret: kept to match by
    installer = member(members, "installer.json")
    assert installer["uninstalled"] == "2026-11-25T09:00:00Z"
    assert installer["heartbeat"]["time"] == 1
    assert b"wrapped 'multus'" in member(members, "installer-log.txt")


def test_a_link_is_listed_never_followed(node, tmp_path):
    root = node[0]
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "99-stolen.conf").write_text(json.dumps({"type": "x", "note": "OUTSIDE-ROOT"}))
    (outside / "delguard.log").write_text(json.dumps({"msg": "OUTSIDE-ROOT"}) + "\n")
    (root / "etc/cni/net.d/98-link.conf").symlink_to(outside / "99-stolen.conf")
    logs = root / "var/log/cni-delguard"
    for p in logs.iterdir():
        p.unlink()
    logs.rmdir()
    logs.symlink_to(outside)
    members = report(node)
    for data in members.values():
        assert b"OUTSIDE-ROOT" not in data
    listing = member(members, "conf-dir.json")["entries"]
    (link,) = [e for e in listing if e["name"] == "98-link.conf"]
    assert link["kind"] == "link" and link["target"] == str(outside / "99-stolen.conf")
    assert member(members, "log.jsonl") == b""
    manifest = member(members, "manifest.json")
    assert any("symlink" in why for why in manifest["unread"].values())


def test_the_archive_is_bounded(node):
    root = node[0]
    big = {"ts": "2026-11-25T10:00:00Z", "command": "DEL", "decision": "skip",
           "network": "n", "containerID": CID, "pad": "x" * 60000}
    (root / "var/log/cni-delguard/delguard.log").write_text(
        "".join(json.dumps(big) + "\n" for _ in range(400)))
    members = report(node, "--log-records", str(bugreport.MAX_RECORDS))
    assert sum(len(d) for d in members.values()) <= bugreport.TOTAL_LIMIT + 65536
    log = members[f"{bugreport.PREFIX}/log.jsonl"]
    assert len(log) <= bugreport.MEMBER_LIMIT
    assert member(members, "manifest.json")["members"]["log.jsonl"]["cut"] is True


def test_an_existing_output_is_not_overwritten(node, tmp_path):
    out = tmp_path / "taken"
    out.write_text("mine")
    argv = ["bugreport", "--root", str(node[0]), "--output", str(out)]
    err = io.StringIO()
    assert cli.main(argv, {}, io.BytesIO(), io.BytesIO(), err) == 2
    assert out.read_text() == "mine" and "cannot write" in err.getvalue()


def test_output_dash_writes_the_archive_to_stdout(node):
    root, live, _ = node
    out = io.BytesIO()
    argv = ["bugreport", "--root", str(root), "--output", "-", "--live-file", str(live)]
    assert cli.main(argv, {}, io.BytesIO(), out, io.StringIO()) == 0
    with tarfile.open(fileobj=io.BytesIO(out.getvalue())) as tar:
        assert f"{bugreport.PREFIX}/versions.json" in tar.getnames()


def test_the_guard_under_test_writes_it_to_stdout_as_kubectl_exec_reads_it(node):
    """The same as a process: the frozen bundle (tarfile, gzip and the tools' modules bundled),
    or the package with DELGUARD_UNDER_TEST=package."""
    if guard.under_test() == "frozen":
        guard.frozen_or_skip()
    root, live, _ = node
    proc = subprocess.run(
        [*guard.guard_argv(), "bugreport", "--root", str(root), "--output", "-",
         "--live-file", str(live)],
        capture_output=True, timeout=120, check=False, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    assert set(members) == {f"{bugreport.PREFIX}/{n}" for n in bugreport.MEMBERS
                            if n != "installer-log.txt"}
    for data in members.values():
        assert not [s for s in SECRETS.values() if s.encode() in data]
