"""cni_delguard/ops/redact.py: what a bug report keeps of a string, a key and a conf."""

from __future__ import annotations

import json

import pytest

from cni_delguard.guard.models import GuardConf
from cni_delguard.ops import redact

R = redact.REDACTED
SOCKET = "/run/openvswitch/kube-ovn-daemon.sock"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param("x -----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE----- y",
                     f"x {R} y", id="pem-block"),
        pytest.param("-----BEGIN PRIVATE KEY-----\nMIIE (cut)", R, id="pem-cut-short"),
        pytest.param("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.sig", R, id="jwt"),
        pytest.param("Authorization: Bearer abcdef123456", f"Authorization: {R}", id="bearer"),
        pytest.param("https://bob:pa55@host/x", f"https://{R}@host/x", id="url-userinfo"),
        pytest.param("login password=hunter2 failed", f"login password={R} failed",
                     id="pair"),
        pytest.param('{"api_key": "k1"} plus', f'{{"api_key": "{R}"}} plus', id="pair-quoted"),
        pytest.param("QUtJQVlPVVJTRUNSRVRLRVlIRVJFMTIzNDU2Nzg5MA==", R, id="base64"),
        pytest.param('{"token": "t", "n": 1}', f'{{"n": 1, "token": "{R}"}}', id="json-inside"),
        pytest.param("0123456789abcdef" * 4, "0123456789abcdef" * 4, id="container-id-kept"),
        pytest.param("sha256:" + "ab" * 32, "sha256:" + "ab" * 32, id="digest-kept"),
        pytest.param(SOCKET, SOCKET, id="path-kept"),
        pytest.param("server_socket is required in cni.conf",
                     "server_socket is required in cni.conf", id="error-kept"),
        pytest.param("K8S_POD_INFRA_CONTAINER_ID=" + "ab" * 32,
                     "K8S_POD_INFRA_CONTAINER_ID=" + "ab" * 32, id="cni-args-kept"),
    ],
)
def test_text(given, expected):
    assert redact.text(given) == expected


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        pytest.param("password", True, id="password"),
        pytest.param("apiToken", True, id="token"),
        pytest.param("tlsCert", True, id="cert"),
        pytest.param("private_key", True, id="private-key"),
        pytest.param("apiKey", True, id="api-key"),
        pytest.param("kubeconfig", False, id="kubeconfig"),
        pytest.param("server_socket", False, id="server-socket"),
        pytest.param("containerID", False, id="container-id"),
        pytest.param("stateDir", False, id="state-dir"),
    ],
)
def test_secret_key(key, secret):
    assert redact.secret_key(key) is secret


def test_secrets_keeps_keys_and_redacts_at_any_depth():
    value = {"a": [{"password": "p", "b": "ok"}], "token": "", "n": 1.5}
    assert redact.secrets(value) == {"a": [{"password": R, "b": "ok"}], "token": "", "n": 1.5}


def test_a_single_plugin_conf_keeps_the_network_keys():
    conf = {"cniVersion": "0.3.1", "name": "n", "type": "bridge", "bridge": "cni0",
            "ipam": {"type": "host-local", "subnet": "10.0.0.0/8"}}
    assert redact.conf(conf) == {"cniVersion": "0.3.1", "name": "n", "type": "bridge",
                                 "bridge": redact.OMITTED,
                                 "ipam": {"type": "host-local", "subnet": redact.OMITTED}}
    assert redact.conf(conf, include_plugin_config=True) == conf


def test_a_field_of_another_plugin_named_like_the_guards_is_omitted():
    conf = {"cniVersion": "1.0.0", "name": "n",
            "plugins": [{"type": "other", "stateDir": "/x", "delegate": {"type": "t", "z": 1}}]}
    (plugin,) = redact.conf(conf)["plugins"]
    assert plugin == {"type": "other", "stateDir": redact.OMITTED, "delegate": redact.OMITTED}


def test_the_guard_keys_are_the_models():
    fields = {f.alias or name for name, f in GuardConf.model_fields.items()}
    spec = redact.NETWORK_KEYS | redact.PLUGIN_KEYS
    assert fields - spec == redact.GUARD_KEYS


def test_output_is_json_serializable():
    json.dumps(redact.conf({"plugins": [{"type": "x", "k": float("1")}]}))
