"""jsonlite must parse and print exactly what the json module does (it drives the same C code).

Here json is loaded; test_jsonlite_isolated.py runs the product's path where it never is."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cni_delguard.cni import jsonlite

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


@pytest.mark.parametrize("data", [b"{not json", b'{"a" 1}', b"{'a': 1}", b"[1 2]", b'"\\x"'])
def test_syntax_errors_are_value_errors_before_json_is_imported(data):
    """In a fresh interpreter (json.decoder not yet imported, as in the exec'd plugin), the C
    scanner cannot build its JSONDecodeError: jsonlite must still raise a ValueError."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "from cni_delguard.cni import jsonlite\n"
        "assert 'json.decoder' not in sys.modules\n"
        "try:\n"
        f"    jsonlite.loads({data!r})\n"
        "except ValueError:\n"
        "    print('ValueError')\n"
        "except BaseException as e:\n"
        "    print(type(e).__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "ValueError"
