"""The one error type and its JSON."""

from __future__ import annotations

import json

from cni_delguard.cni import errors


def test_cni_error_json_has_the_spec_keys():
    body = json.loads(errors.CniError(7, "bad config", "stateDir: x").to_json("1.0.0"))
    assert body == {"cniVersion": "1.0.0", "code": 7, "msg": "bad config", "details": "stateDir: x"}


def test_details_are_omitted_when_empty():
    assert "details" not in json.loads(errors.CniError(4, "m").to_json("0.4.0"))


def test_a_delegate_error_goes_out_byte_for_byte_with_its_exit_status():
    raw = b'{"cniVersion":"0.4.0","code":123,"msg":"their words","details":"x"}'
    err = errors.DelegateError(123, "their words", raw, exit_status=3)
    assert err.to_json("1.0.0") == raw
    assert err.exit_code() == 3
    assert errors.DelegateError(1, "m", raw, exit_status=-9).exit_code() == 1
