"""Fixtures for in-process tests: a temp node (bin dir with the fake delegate, state, caches)."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from cni_delguard import cli
from cni_delguard.guard import config
from tests.support.confs import guard_conf, stale_delegate
from tests.support.fakes import install_fake
from tests.support.kubeapi import KubeAPI
from tests.support.paths import widen
from tests.support.records import fake_calls, guard_log


class Node:
    """A temp CNI node: bin dir, the guard's state/log, libcni and multus caches, the fake.

    `defaults` is what the guard falls back to when a config leaves a key out or cannot be read
    (its host dirs in the product): here dirs under root/defaults, given to every run.
    """

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
        widen(self.bin)
        self.default_root = root / "defaults"
        self.defaults = config.Defaults(
            state_dir=str(self.default_root / "state"),
            result_cache_dirs=(str(self.default_root / "results"),),
            multus_cache_dirs=(str(self.default_root / "multus"),),
            log_file=str(self.default_root / "delguard.log"),
        )

    def conf(self, version: str = "1.0.0", **extra: object) -> dict[str, object]:
        knobs: dict[str, object] = extra.pop("delegate", {})  # type: ignore[assignment]
        delegate = stale_delegate(self.fake_state, self.record, **knobs)
        return (
            guard_conf(
                delegate,
                version=version,
                state_dir=self.state,
                log_file=self.log,
                result_cache_dirs=[self.results],
                multus_cache_dirs=[self.multus],
                timeouts={"add": 10, "del": 10, "check": 10, "gc": 10, "status": 10},
            )
            | extra
        )

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
        """Run the plugin in-process with this node's defaults; (exit code, parsed stdout or None
        when empty)."""
        data = conf if isinstance(conf, bytes) else json.dumps(conf).encode()
        out = io.BytesIO()
        code = cli.plugin_main(self.env(command, **env), io.BytesIO(data), out, dflt=self.defaults)
        text = out.getvalue()
        return code, (json.loads(text) if text else None)

    def calls(self) -> list[str]:
        """The commands the fake delegate received, in order."""
        return [c["command"] for c in fake_calls(self.record)]

    def decisions(self) -> list[dict[str, object]]:
        return guard_log(self.log)

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


@pytest.fixture
def default_dirs(node: Node) -> Path:
    """Where the node's defaults (given to the guard, not patched into it) point."""
    return node.default_root


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[KubeAPI]:
    """The tests' Kubernetes API server (tests/support/kubeapi.py), on loopback, started."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not found (tools/install-deps.sh test installs it)")
    server = KubeAPI(tmp_path / "api")
    server.start()
    try:
        yield server
    finally:
        server.stop()
