"""tests/support/kubeapi.py: what multus's client-go asks of it, answered as an API server would."""

from __future__ import annotations

import http.client
import json
import ssl
from typing import Any

from tests.support.kubeapi import KubeAPI


def connect(api: KubeAPI) -> http.client.HTTPSConnection:
    assert api.cert is not None
    context = ssl.create_default_context(cafile=str(api.cert))  # the kubeconfig's trust
    return http.client.HTTPSConnection("127.0.0.1", api.port, context=context, timeout=30)


def get(api: KubeAPI, path: str) -> tuple[int, Any]:
    conn = connect(api)
    conn.request("GET", path)
    res = conn.getresponse()
    body = json.loads(res.read())
    conn.close()
    return res.status, body


def test_pod_get_and_not_found(api: KubeAPI) -> None:
    api.put_pod("default", "p1", "u1", "n1")
    status, pod = get(api, "/api/v1/namespaces/default/pods/p1")
    assert status == 200
    assert pod["metadata"]["uid"] == "u1"
    status, body = get(api, "/api/v1/namespaces/default/pods/p2")
    assert (status, body["reason"]) == (404, "NotFound")
    assert api.count("GET", "pods") == 2


def test_list_honours_the_node_field_selector(api: KubeAPI) -> None:
    api.put_pod("default", "here", "u1", "n1")
    api.put_pod("default", "there", "u2", "n2")
    status, listing = get(api, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1")
    assert status == 200
    assert [p["metadata"]["name"] for p in listing["items"]] == ["here"]
    assert int(listing["metadata"]["resourceVersion"]) >= 3


def test_watch_list_then_live_events(api: KubeAPI) -> None:
    api.put_pod("default", "p1", "u1", "n1")
    conn = connect(api)
    conn.request("GET", "/api/v1/pods?watch=true&sendInitialEvents=true"
                 "&resourceVersionMatch=NotOldThan&allowWatchBookmarks=true")
    res = conn.getresponse()
    assert res.status == 200

    def event() -> dict[str, Any]:
        return json.loads(res.readline())  # one event per line, chunked decoding by http.client

    first = event()
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "p1")
    bookmark = event()
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert api.delete_pod("default", "p1")
    gone = event()
    assert (gone["type"], gone["object"]["metadata"]["name"]) == ("DELETED", "p1")
    conn.close()


def test_nads_and_dropped_writes(api: KubeAPI) -> None:
    api.put_nad("default", "attachnet", {"cniVersion": "0.3.1", "type": "kube-ovn"})
    status, nad = get(api, "/apis/k8s.cni.cncf.io/v1/namespaces/default/"
                      "network-attachment-definitions/attachnet")
    assert status == 200
    assert json.loads(nad["spec"]["config"])["type"] == "kube-ovn"
    conn = connect(api)
    conn.request("POST", "/api/v1/namespaces/default/events", body=b"\x00protobuf")
    assert conn.getresponse().status == 201
    conn.close()
