"""tests/fakes/kube_ovn.py, run as a plugin: what it copies from kube-ovn, case by case."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.fakes import install_kube_ovn

ARGS = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p1"


@pytest.fixture
def plugin(tmp_path: Path) -> tuple[Path, Path]:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"stateDir": str(tmp_path / "state"),
                                    "recordFile": str(tmp_path / "record.jsonl")}))
    (tmp_path / "bin").mkdir()
    (tmp_path / "sock").touch()
    return install_kube_ovn(tmp_path / "bin", settings), tmp_path


def run(plugin: Path, command: str, conf: dict[str, Any], args: str = ARGS) -> tuple[int, Any]:
    env = {"PATH": "/usr/bin:/bin", "CNI_COMMAND": command, "CNI_CONTAINERID": "c1",
           "CNI_IFNAME": "eth0", "CNI_NETNS": "/proc/self/ns/net", "CNI_ARGS": args}
    res = subprocess.run([str(plugin)], input=json.dumps(conf), env=env, capture_output=True,
                         text=True, timeout=60, check=False)
    return res.returncode, json.loads(res.stdout) if res.stdout else None


def conf(**keys: Any) -> dict[str, Any]:
    return {"cniVersion": "0.3.1", "name": "kube-ovn", "type": "kube-ovn"} | keys


@pytest.mark.parametrize(
    ("keys", "args", "code", "said"),
    [
        pytest.param({}, ARGS, 7, "server_socket is required in cni.conf", id="no-socket"),
        pytest.param({"type": "macvlan", "server_socket": "SOCK", "ipam": {"type": "kube-ovn"}},
                     ARGS, 7, "server_socket is required", id="not-kube-ovn-reads-ipam-only"),
        pytest.param({"server_socket": "SOCK"}, "IgnoreUnknown=1", 7,
                     "K8S_POD_NAME is required in CNI_ARGS", id="no-pod-args"),
        pytest.param({"server_socket": "GONE"}, ARGS, 11, "connect: no such file",
                     id="daemon-down"),
    ],
)
@pytest.mark.parametrize("command", ["ADD", "DEL"])
def test_refusals(plugin: tuple[Path, Path], command: str, keys: dict[str, Any], args: str,
                  code: int, said: str) -> None:
    path, tmp = plugin
    keys = {k: str(tmp / "sock") if v == "SOCK" else str(tmp / "gone") if v == "GONE" else v
            for k, v in keys.items()}
    rc, out = run(path, command, conf(**keys), args)
    assert rc == 1
    assert out["code"] == code
    assert said in out["msg"] + out["details"]


def test_ipam_socket_serves_another_type(plugin: tuple[Path, Path]) -> None:
    path, tmp = plugin
    rc, _ = run(path, "ADD", conf(type="macvlan",
                                  ipam={"type": "kube-ovn", "server_socket": str(tmp / "sock")}))
    assert rc == 0


def test_del_is_idempotent_with_a_complete_config(plugin: tuple[Path, Path]) -> None:
    path, tmp = plugin
    full = conf(server_socket=str(tmp / "sock"))
    assert run(path, "DEL", full) == (0, None), "no state: kube-ovn's daemon answers 204"
    rc, result = run(path, "ADD", full)
    assert rc == 0
    assert result["interfaces"][0]["name"] == "eth0"
    assert (tmp / "state" / "c1:eth0").exists()
    assert run(path, "DEL", full) == (0, None)
    assert not (tmp / "state" / "c1:eth0").exists()
    records = [json.loads(line) for line in (tmp / "record.jsonl").read_text().splitlines()]
    assert [(r["command"], r["phase"]) for r in records] == [
        ("DEL", "start"), ("DEL", "end"), ("ADD", "start"), ("ADD", "end"),
        ("DEL", "start"), ("DEL", "end")]


def test_injected_failures_come_from_the_settings_file(plugin: tuple[Path, Path]) -> None:
    path, tmp = plugin
    full = conf(server_socket=str(tmp / "sock"))
    assert run(path, "ADD", full)[0] == 0
    settings = json.loads((tmp / "settings.json").read_text())
    (tmp / "settings.json").write_text(json.dumps(settings | {"failDel": 11}))
    rc, out = run(path, "DEL", full)
    assert (rc, out["code"]) == (1, 11)
    assert (tmp / "state" / "c1:eth0").exists(), "a refused DEL keeps the state"
