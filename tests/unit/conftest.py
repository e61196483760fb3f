"""Fixtures for in-process tests: a temp node (bin dir with the fake delegate, state, caches)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from cni_delguard import cli
from cni_delguard.guard import config
from tests.support.fakes import install_fake


class Node:
    """A temp CNI node: bin dir, the guard's state/log, libcni and multus caches, the fake."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.state = root / "state"
        self.results = root / "results"
        self.multus = root / "multus"
        self.fake_state = root / "fake"
        self.record = root / "record.jsonl"
        self.log = root / "log" / "delguard.log"
        for d in (self.bin, self.results, self.multus):
            d.mkdir()
        install_fake(self.bin)

    def conf(self, version: str = "1.0.0", **extra: object) -> dict[str, object]:
        delegate = {
            "type": "stale-delegate",
            "stateDir": str(self.fake_state),
            "recordFile": str(self.record),
        }
        delegate.update(extra.pop("delegate", {}))  # type: ignore[arg-type]
        conf: dict[str, object] = {
            "cniVersion": version,
            "name": "net1",
            "type": "cni-delguard",
            "delegate": delegate,
            "stateDir": str(self.state),
            "logFile": str(self.log),
            "resultCacheDirs": [str(self.results)],
            "multusCacheDirs": [str(self.multus)],
            "timeouts": {"add": 10, "del": 10, "check": 10, "gc": 10, "status": 10},
        }
        conf.update(extra)
        return conf

    def libcni_cache(
        self, cid: str = "c1", ifname: str = "eth0", body: bytes | None = None
    ) -> Path:
        """libcni's result cache for (net1, cid, ifname), as libcni writes it after an ADD
        (libcni/api.go cachedInfo), or `body` as given (a torn or foreign file)."""
        path = self.results / f"net1-{cid}-{ifname}"
        if body is None:
            entry = {"kind": "cniCacheV1", "containerId": cid, "ifName": ifname,
                     "networkName": "net1", "config": "e30=", "result": {"cniVersion": "1.0.0"}}
            body = json.dumps(entry).encode()
        path.write_bytes(body)
        return path

    def env(self, command: str, cid: str = "c1", ifname: str = "eth0") -> dict[str, str]:
        return {
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": cid,
            "CNI_NETNS": "/proc/self/ns/net",
            "CNI_IFNAME": ifname,
            "CNI_PATH": str(self.bin),
            "PATH": "/usr/bin:/bin",
        }

    def run(self, command: str, conf: object, **env: str) -> tuple[int, dict[str, object] | None]:
        """Run the plugin in-process; (exit code, parsed stdout or None when empty)."""
        data = conf if isinstance(conf, bytes) else json.dumps(conf).encode()
        out = io.BytesIO()
        environ = self.env(command, **env)
        code = cli.main([], environ, io.BytesIO(data), out, io.StringIO())
        text = out.getvalue()
        return code, (json.loads(text) if text else None)

    def calls(self) -> list[str]:
        """The commands the fake delegate received, in order."""
        if not self.record.exists():
            return []
        return [json.loads(line)["command"] for line in self.record.read_text().splitlines()]

    def decisions(self) -> list[dict[str, object]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def state_files(self) -> list[str]:
        net = self.state / "networks" / "net1"
        return sorted(p.name for p in net.iterdir()) if net.exists() else []


def make_settings(state_dir: str = "/s", caps: tuple[str, ...] = ()) -> config.Settings:
    """Settings as a validated config would give them, for modules that take Settings."""
    return config.Settings(
        {
            "network": "net1",
            "cniVersion": "1.1.0",
            "stateDir": str(state_dir),
            "resultCacheDirs": [],
            "multusCacheDirs": [],
            "timeouts": {},
            "lockTimeout": 1,
            "logFile": "",
            "logLevel": "info",
            "delegateType": "multus",
            "delegateCapabilities": list(caps),
            "mode": "enforce",
        }
    )


@pytest.fixture(autouse=True)
def default_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the guard's defaults (used when a config cannot be read) into tmp_path."""
    from cni_delguard.guard import defaults

    root = tmp_path / "defaults"
    monkeypatch.setattr(defaults, "STATE_DIR", str(root / "state"))
    monkeypatch.setattr(defaults, "RESULT_CACHE_DIRS", (str(root / "results"),))
    monkeypatch.setattr(defaults, "MULTUS_CACHE_DIRS", (str(root / "multus"),))
    monkeypatch.setattr(defaults, "LOG_FILE", str(root / "delguard.log"))
    return root


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)
