"""Execute CNI plugins directly, the way libcni does, for what Debian's cnitool cannot do.

Debian's cnitool (CNI 1.1.2) knows spec versions up to 1.0.0 and only add/check/del. Spec 1.1.0
ADD/CHECK/DEL, GC, STATUS and VERSION are driven here instead: the plugin found by its type in
the bin dir, the CNI_* environment, the network config on stdin with `name`, `cniVersion`,
`prevResult` (and `cni.dev/valid-attachments` for GC) injected, run inside the outer namespace.
`ListRunner` also keeps a libcni-style result cache (`<cache>/results/<net>-<cid>-<ifname>`,
written after a whole ADD succeeded, handed to DEL/CHECK as prevResult from 0.4.0 on).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import holder
from tests.support.cnitool import Outcome, base_env, container_id
from tests.support.netns import Netns


@dataclass(frozen=True)
class PluginExec:
    bin_dir: Path
    outer: Netns | None = None
    # When set, the plugin runs in a private mount namespace whose /var/log is this dir: a guard
    # given a config it cannot read logs to its default logFile, which must not be the host's.
    var_log: Path | None = None

    def env(self, command: str, cid: str = "", netns: str = "", ifname: str = "") -> dict[str, str]:
        env = base_env() | {"CNI_COMMAND": command, "CNI_PATH": str(self.bin_dir)}
        for key, value in (("CNI_CONTAINERID", cid), ("CNI_NETNS", netns), ("CNI_IFNAME", ifname)):
            if value:
                env[key] = value
        return env

    def argv(self, plugin_type: str) -> list[str]:
        path = [str(self.bin_dir / plugin_type)]
        argv = self.outer.exec_argv(path) if self.outer else path
        if self.var_log is None:
            return argv
        self.var_log.mkdir(exist_ok=True)
        return holder.once([(self.var_log, "/var/log")], argv)

    def run(
        self,
        plugin_type: str,
        env: dict[str, str],
        stdin: bytes | dict[str, Any],
        timeout: float = 120,
    ) -> Outcome:
        data = stdin if isinstance(stdin, bytes) else json.dumps(stdin).encode()
        res = subprocess.run(
            self.argv(plugin_type),
            env=env,
            input=data,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        return Outcome(
            res.returncode, res.stdout.decode(errors="replace"), res.stderr.decode(errors="replace")
        )

    def start(
        self, plugin_type: str, env: dict[str, str], stdin: dict[str, Any]
    ) -> subprocess.Popen[bytes]:
        """Start without waiting (for tests that kill the plugin mid-way)."""
        with tempfile.TemporaryFile() as data:
            data.write(json.dumps(stdin).encode())
            data.seek(0)
            return subprocess.Popen(
                self.argv(plugin_type),
                env=env,
                stdin=data,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )


def plugin_conf(
    conflist: dict[str, Any], plugin: dict[str, Any], prev: Any = None
) -> dict[str, Any]:
    conf = dict(plugin)
    conf["name"] = conflist["name"]
    conf["cniVersion"] = conflist["cniVersion"]
    if prev is not None:
        conf["prevResult"] = prev
    return conf


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@dataclass
class ListRunner:
    """ADD/CHECK/DEL of a whole conflist on one attachment, like libcni's *NetworkList calls."""

    execer: PluginExec
    conflist: dict[str, Any]
    cache_dir: Path
    calls: list[Outcome] = field(default_factory=list)

    @property
    def network(self) -> str:
        return str(self.conflist["name"])

    def cache_path(self, cid: str, ifname: str) -> Path:
        return self.cache_dir / "results" / f"{self.network}-{cid}-{ifname}"

    def _step(
        self, command: str, plugin: dict[str, Any], netns: Path, ifname: str, prev: Any
    ) -> Outcome:
        env = self.execer.env(command, container_id(netns), str(netns), ifname)
        out = self.execer.run(plugin["type"], env, plugin_conf(self.conflist, plugin, prev))
        self.calls.append(out)
        return out

    def add(self, netns: Path, ifname: str = "eth0") -> Outcome:
        prev: Any = None
        out = Outcome(0, "", "")
        for plugin in self.conflist["plugins"]:
            out = self._step("ADD", plugin, netns, ifname, prev)
            if out.rc != 0:
                return out
            prev = out.json()
        self._write_cache(container_id(netns), ifname, prev)
        return out

    def _cached(self, netns: Path, ifname: str) -> Any:
        if version_tuple(self.conflist["cniVersion"]) < (0, 4, 0):
            return None
        path = self.cache_path(container_id(netns), ifname)
        return json.loads(path.read_text())["result"] if path.exists() else None

    def check(self, netns: Path, ifname: str = "eth0") -> Outcome:
        prev = self._cached(netns, ifname)
        out = Outcome(0, "", "")
        for plugin in self.conflist["plugins"]:
            out = self._step("CHECK", plugin, netns, ifname, prev)
            if out.rc != 0:
                return out
        return out

    def delete(self, netns: Path, ifname: str = "eth0") -> Outcome:
        prev = self._cached(netns, ifname)
        out = Outcome(0, "", "")
        for plugin in reversed(self.conflist["plugins"]):
            out = self._step("DEL", plugin, netns, ifname, prev)
            if out.rc != 0:
                return out
        self.cache_path(container_id(netns), ifname).unlink(missing_ok=True)
        return out

    def _write_cache(self, cid: str, ifname: str, result: Any) -> None:
        path = self.cache_path(cid, ifname)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {
            "kind": "cniCacheV1",
            "containerId": cid,
            "ifName": ifname,
            "networkName": self.network,
            "result": result,
        }
        path.write_text(json.dumps(entry))


def gc_conf(
    conflist: dict[str, Any], plugin: dict[str, Any], valid: list[tuple[str, str]] | None
) -> dict[str, Any]:
    """GC stdin as libcni (spec 1.1.0) builds it; valid=None leaves the key out."""
    conf = plugin_conf(conflist, plugin)
    if valid is not None:
        conf["cni.dev/valid-attachments"] = [
            {"containerID": cid, "ifname": ifname} for cid, ifname in valid
        ]
    return conf
