"""jsonlite must parse and print exactly what the json module does (it drives the same C code)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cni_delguard import jsonlite

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(JSON)
def test_round_trips_like_json(value):
    text = json.dumps(value)
    assert jsonlite.dumps(value) == text
    assert jsonlite.loads(text.encode()) == json.loads(text)
    assert jsonlite.dumps(value, sort_keys=True, compact=True) == json.dumps(
        value, sort_keys=True, separators=(",", ":")
    )


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=64) | st.text(max_size=64).map(str.encode))
def test_rejects_exactly_what_json_rejects(data):
    try:
        expected = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        with pytest.raises((ValueError, RecursionError)):
            jsonlite.loads(data)
    else:
        got = jsonlite.loads(data)
        assert got == expected or (isinstance(got, float) and math.isnan(got))


@pytest.mark.parametrize(
    "data",
    [b"", b"   ", b"{} x", b"[1,]", b"\xff", b"{'a': 1}", b"[" * 100000],
    ids=["empty", "blank", "extra-data", "trailing-comma", "bad-utf8", "single-quotes", "deep"],
)
def test_malformed(data):
    with pytest.raises((ValueError, RecursionError)):
        jsonlite.loads(data)


def test_whitespace_around_a_value_is_fine():
    assert jsonlite.loads(b' \n\t{"a": [1, 2.5, null, true]}\r\n') == {"a": [1, 2.5, None, True]}


def test_unknown_types_are_rejected_or_stringified():
    with pytest.raises(TypeError):
        jsonlite.dumps({"x": object()})
    assert jsonlite.dumps({"x": b"\x00"}, default_str=True) == '{"x": "b\'\\\\x00\'"}'
