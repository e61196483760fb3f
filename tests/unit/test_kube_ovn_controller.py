"""tests/fakes/kube_ovn_controller.py against the chain's API server: allocation when a pod
appears, release when it is deleted."""

from __future__ import annotations

import pytest

from tests.fakes.kube_ovn_controller import KubeOvnController, pod_address
from tests.support.kubeapi import KubeAPI
from tests.support.waiting import wait_for

NODE = "node-a"



def annotations(api: KubeAPI, name: str) -> dict[str, str]:
    pod = api.store.get("pods", "default", name)
    assert pod is not None
    return dict(pod["metadata"].get("annotations") or {})


def test_a_pod_of_the_node_is_allocated_and_annotated(api: KubeAPI) -> None:
    api.put_pod("default", "p1", "uid-1", NODE)
    api.put_pod("default", "elsewhere", "uid-2", "node-b")
    controller = KubeOvnController(api, NODE)
    controller.reconcile()
    assert [(a.key, a.address) for a in controller.held()] == [
        ("default/p1", pod_address("default", "p1"))]
    notes = annotations(api, "p1")
    assert notes["ovn.kubernetes.io/allocated"] == "true"
    assert notes["ovn.kubernetes.io/ip_address"] == pod_address("default", "p1")
    assert "ovn.kubernetes.io/allocated" not in annotations(api, "elsewhere")
    controller.reconcile()
    assert len(controller.allocations) == 1, "allocated once"


@pytest.mark.parametrize(("after", "held"), [
    pytest.param(None, 0, id="never"),
    pytest.param(3600.0, 0, id="not-yet"),
    pytest.param(0.0, 1, id="at-once"),
])
def test_allocation_waits_for_allocate_after(api: KubeAPI, after: float | None,
                                             held: int) -> None:
    api.put_pod("default", "p1", "uid-1", NODE)
    controller = KubeOvnController(api, NODE, allocate_after=after)
    controller.reconcile()
    assert len(controller.held()) == held


def test_deletion_releases_port_ip_and_address(api: KubeAPI) -> None:
    api.put_pod("default", "p1", "uid-1", NODE)
    controller = KubeOvnController(api, NODE)
    controller.reconcile()
    api.delete_pod("default", "p1")
    controller.reconcile()
    assert controller.held() == [] and controller.allocations[0].released is not None


def test_a_new_pod_of_the_same_name_keeps_them(api: KubeAPI) -> None:
    """handleDeletePod returns early when a pod of that name, another UID, is there."""
    api.put_pod("default", "p1", "uid-1", NODE)
    controller = KubeOvnController(api, NODE)
    controller.reconcile()
    api.delete_pod("default", "p1")
    api.put_pod("default", "p1", "uid-2", NODE)
    controller.reconcile()
    assert [(a.uid, a.released) for a in controller.allocations] == [("uid-2", None)]


def test_it_runs_as_a_thread_until_stopped(api: KubeAPI) -> None:
    controller = KubeOvnController(api, NODE)
    controller.start()
    try:
        api.put_pod("default", "p1", "uid-1", NODE)
        wait_for(controller.held, "the allocation", timeout=30, every=0.05)
        api.delete_pod("default", "p1")
        wait_for(lambda: not controller.held(), "the release", timeout=30, every=0.05)
    finally:
        controller.stop()
