"""The delegate's stdin: its own config, plus what the spec injects, nothing re-serialized away."""

from __future__ import annotations

import json

from cni_delguard.guard import inject
from tests.unit.conftest import make_settings


def test_the_delegates_keys_stay_and_name_and_version_are_the_networks():
    conf = {
        "delegate": {
            "type": "multus",
            "name": "other",
            "cniVersion": "0.3.1",
            "kubeconfig": "/k",
            "delegates": [{"x": 1.5}],
        },
        "cniVersion": "1.1.0",
        "name": "net1",
    }
    sent = json.loads(inject.delegate_conf(conf, make_settings()))
    assert sent == {
        "type": "multus",
        "name": "net1",
        "cniVersion": "1.1.0",
        "kubeconfig": "/k",
        "delegates": [{"x": 1.5}],
    }


def test_runtime_config_is_filtered_by_the_delegates_capabilities():
    conf = {
        "delegate": {"type": "multus"},
        "runtimeConfig": {"portMappings": [1], "bandwidth": {}, "ips": ["10.0.0.2"]},
    }
    sent = json.loads(inject.delegate_conf(conf, make_settings(caps=("portMappings", "ips"))))
    assert sent["runtimeConfig"] == {"portMappings": [1], "ips": ["10.0.0.2"]}
    assert "runtimeConfig" not in json.loads(inject.delegate_conf(conf, make_settings()))


def test_prev_result_and_valid_attachments_pass_through():
    conf = {
        "delegate": {"type": "multus"},
        "prevResult": {"ips": [{"address": "10.1.0.2/24"}]},
        "cni.dev/valid-attachments": [{"containerID": "a", "ifname": "eth0"}],
    }
    sent = json.loads(inject.delegate_conf(conf, make_settings()))
    assert sent["prevResult"] == conf["prevResult"]
    assert sent["cni.dev/valid-attachments"] == conf["cni.dev/valid-attachments"]
    assert "prevResult" not in json.loads(inject.delegate_conf(conf, make_settings(), False))


def test_the_runtimes_config_object_is_not_modified():
    delegate = {"type": "multus"}
    inject.delegate_conf({"delegate": delegate}, make_settings())
    assert delegate == {"type": "multus"}
