"""Network namespaces for real-parts tests, made and removed with `ip netns`.

Every name is unique per call (tests may run while other tests run), and `NetnsSet.close()`
deletes every namespace it made, which takes the links, bridges and iptables rules inside along.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

NETNS_DIR = Path("/run/netns")


def available() -> str | None:
    """None when this process can make network namespaces, else the reason it cannot."""
    if os.geteuid() != 0:
        return "needs root for ip netns"
    for tool in ("ip", "iptables-save", "unshare", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} not found (tools/install-deps.sh test installs it)"
    return None


def unique_name(prefix: str) -> str:
    """prefix plus 8 random hex chars; short enough for an interface name when prefix is <= 7."""
    return f"{prefix}{secrets.token_hex(4)}"


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=30)


@dataclass
class Netns:
    name: str

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    def exec_argv(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *argv]

    def links(self) -> dict[str, dict[str, object]]:
        out = ip("-n", self.name, "-j", "-d", "link", "show").stdout
        return {str(link["ifname"]): link for link in json.loads(out or "[]")}

    def addresses(self, ifname: str) -> list[str]:
        out = ip("-n", self.name, "-j", "addr", "show", "dev", ifname).stdout
        return [
            f"{a['local']}/{a['prefixlen']}"
            for link in json.loads(out or "[]")
            for a in link.get("addr_info", [])
            if a.get("family") == "inet"
        ]

    def iptables_save(self) -> str:
        argv = self.exec_argv(["iptables-save"])
        return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30).stdout


@dataclass
class NetnsSet:
    """Makes namespaces on demand and deletes all of them on close (a fixture's finalizer)."""

    prefix: str = "dg"
    made: list[Netns] = field(default_factory=list)

    def new(self, role: str = "") -> Netns:
        ns = Netns(unique_name(f"{self.prefix}{role}-"))
        ip("netns", "add", ns.name)
        self.made.append(ns)
        ip("-n", ns.name, "link", "set", "lo", "up")
        return ns

    def close(self) -> list[str]:
        """Delete every namespace made here; return the errors (empty when all went)."""
        errors = []
        while self.made:
            ns = self.made.pop()
            res = ip("netns", "del", ns.name, check=False)
            if res.returncode != 0 and ns.path.exists():
                errors.append(f"{ns.name}: {res.stderr.strip()}")
        return errors
