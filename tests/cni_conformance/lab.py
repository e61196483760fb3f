"""The test bench of the conformance suite: one outer namespace, a bin dir, caches under tmp_path.

A `Lab` is made per test (fixture `lab` in conftest.py). Everything a test creates lives either in
its tmp_path or in namespaces the lab made, and the fixture's finalizer deletes those namespaces
(with the bridges, veths and iptables rules inside) and kills any plugin process a test left
running, also when the test failed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests.support.cniexec import ListRunner, PluginExec, version_tuple
from tests.support.cnitool import Cnitool, Outcome, container_id
from tests.support.confs import guard_plugin, stale_delegate
from tests.support.fakes import install_fake
from tests.support.guard import install_guard
from tests.support.netns import Netns, NetnsSet
from tests.support.recorder import install_recorder, read_records
from tests.support.records import fake_calls, guard_log

VERSIONS = ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]
DEBIAN_PLUGINS = Path("/usr/lib/cni")
# Debian's containernetworking-plugins 1.1.1 and cnitool (libcni 1.1.2) implement spec <= 1.0.0.
REFERENCE_MAX = "1.0.0"
REFERENCE_SKIP = (
    "Debian's reference plugins 1.1.1 and cnitool (libcni 1.1.2) implement CNI spec up to "
    "1.0.0 and reject 1.1.0 configs; 1.1.0 is covered with the fake delegate instead"
)
SUBNET = "10.77.0.0/24"


def has_check(version: str) -> bool:
    return version_tuple(version) >= (0, 4, 0)


def reference_ok(version: str) -> bool:
    return version_tuple(version) <= version_tuple(REFERENCE_MAX)


# The versions Debian's plugins and cnitool speak; the others are skipped, with the reason, before
# the lab is made (the matrix shows them as "skip").
REFERENCE_VERSIONS = [
    pytest.param(v, marks=pytest.mark.skipif(not reference_ok(v), reason=REFERENCE_SKIP))
    for v in VERSIONS
]


class Runner(Protocol):
    def add(self, netns: Path, ifname: str = "eth0") -> Outcome: ...
    def check(self, netns: Path, ifname: str = "eth0") -> Outcome: ...
    def delete(self, netns: Path, ifname: str = "eth0") -> Outcome: ...
    def cache_path(self, cid: str, ifname: str) -> Path: ...


@dataclass
class CnitoolRunner:
    """cnitool add/check/del on one network, with optional CAP_ARGS per command."""

    tool: Cnitool
    network: str
    cap_args: dict[str, dict[str, Any]] = field(default_factory=dict)

    def _run(self, command: str, netns: Path, ifname: str) -> Outcome:
        return self.tool.run(command, self.network, netns, ifname, self.cap_args.get(command))

    def add(self, netns: Path, ifname: str = "eth0") -> Outcome:
        return self._run("add", netns, ifname)

    def check(self, netns: Path, ifname: str = "eth0") -> Outcome:
        return self._run("check", netns, ifname)

    def delete(self, netns: Path, ifname: str = "eth0") -> Outcome:
        return self._run("del", netns, ifname)

    def cache_path(self, cid: str, ifname: str) -> Path:
        return self.tool.cache_dir / "results" / f"{self.network}-{cid}-{ifname}"


@dataclass
class Lab:
    tmp: Path
    nets: NetnsSet
    outer: Netns
    cnitool_bin: Path
    pids: list[int] = field(default_factory=list)
    _counter: int = 0

    def __post_init__(self) -> None:
        self.tmp.mkdir(mode=0o755, parents=True, exist_ok=True)
        for sub in ("bin", "conf", "cache", "state", "data", "multus", "fake-state", "log"):
            (self.tmp / sub).mkdir(mode=0o755)
        install_guard(self.bin_dir)
        for plugin in sorted(DEBIAN_PLUGINS.iterdir()):
            (self.bin_dir / plugin.name).symlink_to(plugin)
        install_fake(self.bin_dir)

    # -- paths ---------------------------------------------------------------------------------
    @property
    def bin_dir(self) -> Path:
        return self.tmp / "bin"

    @property
    def conf_dir(self) -> Path:
        return self.tmp / "conf"

    @property
    def cache_dir(self) -> Path:
        return self.tmp / "cache"

    @property
    def state_dir(self) -> Path:
        return self.tmp / "state"

    @property
    def data_dir(self) -> Path:
        return self.tmp / "data"

    @property
    def log_file(self) -> Path:
        return self.tmp / "log" / "delguard.log"

    @property
    def fake_record(self) -> Path:
        return self.tmp / "fake-record.jsonl"

    @property
    def fake_state(self) -> Path:
        return self.tmp / "fake-state"

    @property
    def tool(self) -> Cnitool:
        return Cnitool(self.cnitool_bin, self.outer, self.conf_dir, self.bin_dir, self.cache_dir)

    @property
    def execer(self) -> PluginExec:
        return PluginExec(self.bin_dir, self.outer, var_log=self.cache_dir.parent / "exec-var-log")

    # -- configs -------------------------------------------------------------------------------
    def unique(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}{self._counter}-{self.outer.name[-8:]}"

    def guard(self, delegate: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return (
            guard_plugin(
                delegate,
                state_dir=self.state_dir,
                result_cache_dirs=[self.cache_dir / "results"],
                multus_cache_dirs=[self.tmp / "multus"],
                log_file=self.log_file,
                logLevel="debug",
            )
            | extra
        )

    def bridge(self, plugin_type: str = "bridge", bridge: str = "", **ipam: Any) -> dict[str, Any]:
        rng: dict[str, Any] = {"subnet": SUBNET} | ipam
        return {
            "type": plugin_type,
            "bridge": bridge or self.unique("br")[:15],
            "isGateway": True,
            "ipMasq": True,
            "ipam": {
                "type": "host-local",
                "ranges": [[rng]],
                "dataDir": str(self.data_dir),
                "routes": [{"dst": "0.0.0.0/0"}],
            },
        }

    def fake(self, **knobs: Any) -> dict[str, Any]:
        return stale_delegate(self.fake_state, self.fake_record, **knobs)

    def recorded_bridge(self, **ipam: Any) -> tuple[Path, dict[str, Any]]:
        """Debian's bridge behind the recording wrapper `rec-bridge`: (its record, its config)."""
        return self.recorder("rec-bridge", "bridge"), self.bridge("rec-bridge", **ipam)

    def recorder(self, name: str, target: str, **kwargs: Any) -> Path:
        """Install rec-<name> wrapping bin_dir/target; return its record file."""
        record = self.tmp / f"{name}.record.jsonl"
        install_recorder(self.bin_dir, name, self.bin_dir / target, record, **kwargs)
        return record

    def conflist(
        self, version: str, plugins: list[dict[str, Any]], name: str = ""
    ) -> dict[str, Any]:
        conf = {"cniVersion": version, "name": name or self.unique("net"), "plugins": plugins}
        path = self.conf_dir / f"{conf['name']}.conflist"
        path.write_text(json.dumps(conf, indent=1), encoding="utf-8")
        return conf

    # -- runtimes ------------------------------------------------------------------------------
    def runner(self, conflist: dict[str, Any], **cap_args: dict[str, Any]) -> Runner:
        """cnitool where it can run this spec version, else libcni-style direct exec."""
        if reference_ok(conflist["cniVersion"]):
            return CnitoolRunner(self.tool, conflist["name"], cap_args)
        return ListRunner(self.execer, conflist, self.cache_dir)

    def exec_guard(
        self,
        command: str,
        conf: dict[str, Any] | bytes,
        cid: str = "",
        netns: Path | None = None,
        ifname: str = "",
    ) -> Outcome:
        env = self.execer.env(command, cid, str(netns) if netns else "", ifname)
        return self.execer.run("cni-delguard", env, conf)

    # -- state inspection ----------------------------------------------------------------------
    def markers(self, network: str) -> dict[str, str]:
        """key -> marker state, from <stateDir>/networks/<network>/*.json."""
        ndir = self.state_dir / "networks" / network
        if not ndir.is_dir():
            return {}
        return {p.stem: json.loads(p.read_text()).get("state", "?") for p in ndir.glob("*.json")}

    def state_files(self) -> list[str]:
        """Every file under <stateDir>/networks (markers, locks, temp files), relative."""
        root = self.state_dir / "networks"
        if not root.exists():
            return []
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())

    def leases(self, network: str) -> list[str]:
        """host-local's reservations: one file per IP in <dataDir>/<network>/."""
        ndir = self.data_dir / network
        if not ndir.is_dir():
            return []
        return sorted(p.name for p in ndir.iterdir() if p.name[0].isdigit())

    def fake_calls(self, command: str | None = None) -> list[dict[str, Any]]:
        return fake_calls(self.fake_record, command)

    def calls(self, record: Path, command: str | None = None) -> list[dict[str, Any]]:
        return [c for c in read_records(record) if command is None or c["command"] == command]

    def log_lines(self, **fields: Any) -> list[dict[str, Any]]:
        return guard_log(self.log_file, **fields)

    def key(self, netns: Path, ifname: str = "eth0") -> str:
        return f"{container_id(netns)}:{ifname}"

    # -- teardown ------------------------------------------------------------------------------
    def close(self) -> list[str]:
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return self.nets.close()
