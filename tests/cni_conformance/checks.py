"""Assertions about a real attachment (bridge + host-local) shared by the scenarios."""

from __future__ import annotations

import ipaddress
from typing import Any

from tests.cni_conformance.lab import SUBNET, Lab
from tests.support.cnitool import Outcome, container_id
from tests.support.netns import Netns


def ok(out: Outcome, what: str) -> Any:
    """Assert success and return the parsed stdout (None when it is empty)."""
    assert out.rc == 0, f"{what} failed\n{out.describe()}"
    return out.json() if out.stdout.strip() else None


def failed(out: Outcome, what: str) -> None:
    assert out.rc != 0, f"{what} should have failed\n{out.describe()}"


def result_ip(result: dict[str, Any]) -> str:
    """The container address from a CNI result of any version (0.3.x and later all use 'ips')."""
    ips = result.get("ips") or []
    assert ips, f"no ips in result {result}"
    return str(ips[0]["address"])


def assert_attached(
    lab: Lab, inner: Netns, network: str, result: dict[str, Any], bridge: str
) -> None:
    """The attachment the result describes exists: address, lease, veth, masquerade rule."""
    address = result_ip(result)
    assert ipaddress.ip_interface(address).ip in ipaddress.ip_network(SUBNET)
    assert address in inner.addresses("eth0")
    ip = address.split("/")[0]
    assert lab.leases(network) == [ip]
    assert bridge in lab.outer.links()
    assert container_id(inner.path) in lab.outer.iptables_save()


def assert_detached(lab: Lab, inner: Netns, network: str, bridge: str) -> None:
    """Nothing of the attachment is left: no eth0, no lease, no veth on the bridge, no rules."""
    assert "eth0" not in inner.links()
    assert lab.leases(network) == []
    ports = [name for name, link in lab.outer.links().items() if link.get("master") == bridge]
    assert ports == [], f"veths left on {bridge}: {ports}"
    assert container_id(inner.path) not in lab.outer.iptables_save()
