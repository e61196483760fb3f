"""cnitool, built from Debian's CNI source by tools/build-cnitool.sh, run the way the tests need it.

Each call runs `ip netns exec <outer> cnitool ...` inside a private mount namespace in which the
test's own cache dir is bound over /var/lib/cni (cnitool's hard-coded libcni cache dir: Debian's
CNI 1.1.2 has no env var or flag for it). So the bridge and its iptables rules live in the outer
namespace, the libcni cache lives under tmp_path, and the host sees neither.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import holder
from tests.support.netns import Netns

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "tools" / "build-cnitool.sh"
LIBCNI_CACHE_DIR = Path("/var/lib/cni")  # libcni.CacheDir in CNI 1.1.2, not configurable


@dataclass(frozen=True)
class Outcome:
    """What a runtime sees from one plugin or cnitool invocation."""

    rc: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def describe(self) -> str:
        return f"rc={self.rc}\nstdout={self.stdout!r}\nstderr={self.stderr[-2000:]!r}"


@functools.cache
def cnitool_binary() -> Path:
    """$CNITOOL if set, else the cached build (built on first use; instant afterwards)."""
    if "CNITOOL" in os.environ:
        return Path(os.environ["CNITOOL"])
    out = subprocess.run(
        [str(BUILD_SCRIPT)], check=True, capture_output=True, text=True, timeout=900
    ).stdout
    return Path(out.strip().splitlines()[-1])


def container_id(netns_path: Path) -> str:
    """cnitool's container ID: 'cnitool-' and 20 hex chars of the sha512 of the netns path."""
    return "cnitool-" + hashlib.sha512(str(netns_path).encode()).hexdigest()[:20]


def base_env() -> dict[str, str]:
    """A small, fixed environment: no CNI_* leaking in from the caller."""
    return {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "LANG": "C.UTF-8"}


def ensure_mount_point() -> None:
    """The bind needs /var/lib/cni to exist (tools/install-deps.sh test makes it too)."""
    LIBCNI_CACHE_DIR.mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True)
class Cnitool:
    binary: Path
    outer: Netns
    conf_dir: Path
    bin_dir: Path
    cache_dir: Path

    def result_cache(self, network: str, netns_path: Path, ifname: str = "eth0") -> Path:
        cid = container_id(netns_path)
        return self.cache_dir / "results" / f"{network}-{cid}-{ifname}"

    def argv(self, command: str, network: str, netns_path: Path) -> list[str]:
        inner = self.outer.exec_argv([str(self.binary), command, network, str(netns_path)])
        # A config the guard cannot parse sends its log line to the default logFile under
        # /var/log: that goes to the test's own dir too, never to the host's log.
        var_log = self.cache_dir.parent / f"{self.cache_dir.name}-var-log"
        var_log.mkdir(exist_ok=True)
        return holder.once([(self.cache_dir, str(LIBCNI_CACHE_DIR)), (var_log, "/var/log")],
                           inner)

    def run(
        self,
        command: str,
        network: str,
        netns_path: Path,
        ifname: str = "eth0",
        cap_args: dict[str, Any] | None = None,
        timeout: float = 120,
    ) -> Outcome:
        env = base_env() | {
            "NETCONFPATH": str(self.conf_dir),
            "CNI_PATH": str(self.bin_dir),
            "CNI_IFNAME": ifname,
        }
        if cap_args is not None:
            env["CAP_ARGS"] = json.dumps(cap_args)
        res = subprocess.run(
            self.argv(command, network, netns_path),
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Outcome(res.returncode, res.stdout, res.stderr)
