"""jsonlite as the product runs it: in a fresh `python -I` process where `json` was never imported.

test_jsonlite.py compares jsonlite with the json module in this process, where json is loaded:
there, `_json` finds json.decoder.JSONDecodeError and jsonlite's error path behaves as json's
does. The guard never imports json on its usual paths, so here a child interpreter runs the
product's JSON path on representative CNI configs and results and on malformed input, and
reports (with marshal, not json) what it got and which modules it loaded; the expectations are
computed here, with json. Malformed input inside a value is the one case where jsonlite lets json
itself say what is wrong (it imports json): it runs last, after the no-json check.
"""

from __future__ import annotations

import json
import marshal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
JSON_MODULES = ("json", "json.decoder", "json.encoder", "json.scanner")

# Run in the child: reads marshal'd cases on stdin, writes marshal'd outcomes on stdout.
CHILD = """
import marshal, sys
sys.path.insert(0, REPO)
before = set(sys.modules)
from cni_delguard.cni import jsonlite

def attempt(fn, *args, **kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except (ValueError, TypeError, RecursionError) as exc:
        return ("error", type(exc).__name__, str(exc))

class Opaque:
    def __str__(self):
        return "<opaque>"

cases = marshal.loads(sys.stdin.buffer.read())
out = {"loads": [attempt(jsonlite.loads, data) for data in cases["loads"]],
       "rejected": [attempt(jsonlite.loads, data) for data in cases["rejected"]]}
out["dumps"] = [(attempt(jsonlite.dumps, value),
                 attempt(jsonlite.dumps, value, sort_keys=True, compact=True))
                for value in cases["dumps"]]
out["opaque"] = (attempt(jsonlite.dumps, {"obj": Opaque()}, default_str=True),
                 attempt(jsonlite.dumps, {"obj": Opaque()}))
out["loaded"] = sorted(set(sys.modules) - before)
out["syntax"] = [attempt(jsonlite.loads, data) for data in cases["syntax"]]
out["loaded_after_syntax"] = sorted(set(sys.modules) - before)
sys.stdout.buffer.write(marshal.dumps(out))
"""

RESULT = {
    "cniVersion": "1.0.0",
    "interfaces": [
        {"name": "cni0", "mac": "8a:0c:aa:bb:cc:dd"},
        {"name": "eth0", "mac": "ee:11:22:33:44:55", "sandbox": "/var/run/netns/cni-1234"},
    ],
    "ips": [{"address": "10.88.0.7/16", "gateway": "10.88.0.1", "interface": 1}],
    "routes": [{"dst": "0.0.0.0/0"}],
    "dns": {"nameservers": ["10.96.0.10"], "search": ["svc.cluster.local"], "options": []},
}
ERROR = {"cniVersion": "1.1.0", "code": 7, "msg": "invalid config", "details": "timeouts.add"}
ODD_VALUES = {
    "unicode": "caf\u00e9 \u2603 \U0001f600",
    "escapes": 'quote " backslash \\ newline \n tab \t nul \u0000',
    "numbers": [0, -1, 2**63, -(2**70), 0.1, -0.0, 1e100, 1.5e-10, 3.0],
    "consts": [True, False, None],
    "empty": [{}, [], ""],
    "nested": [[[[{"a": [{"b": None}]}]]]],
}


def example_configs() -> list[bytes]:
    """The conf examples shipped in conf/ and the installer's test data: real configs."""
    found = sorted((REPO / "conf").glob("*/*.conf*")) + sorted(
        (REPO / "tests" / "installer" / "data").glob("*/*.conf*")
    )
    assert found, "no example configs found"
    return [p.read_bytes() for p in found]


def loads_cases() -> list[bytes]:
    texts = [json.dumps(v).encode() for v in (RESULT, ERROR, ODD_VALUES)]
    texts += [
        b' \n\t{"a": [1, 2.5, null, true]}\r\n',
        b"[Infinity, -Infinity]",
        b'"\\ud83d\\ude00"',
    ]
    return example_configs() + texts


# Rejected before any value is parsed, or after a whole one: jsonlite's own errors, no json.
REJECTED = [b"", b"   ", b"{} x", b"[1] [2]", b"\xff", b"x", b"[" * 100000]
# Malformed inside a value: `_json` needs json.decoder to raise, so jsonlite asks json.
SYNTAX = [b"{'a': 1}", b"[1,]", b'{"a" 1}', b'{"a": }', b'"unterminated', b"[1, 2"]


def json_error(data: bytes) -> BaseException:
    """What the json module raises for `data` (it must raise)."""
    try:
        json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        return exc
    raise AssertionError(f"json accepts {data[:40]!r}")


def check_rejection(data: bytes, got: tuple) -> None:
    """`got` (the child's outcome) is the error json gives: the same kind, and for a syntax error
    the same message, or jsonlite's own one naming json's message (`Expecting value: char N`)."""
    assert got[0] == "error", (data[:40], got)
    exc = json_error(data)
    if isinstance(exc, json.JSONDecodeError):
        assert got[1] in ("ValueError", "JSONDecodeError"), got
        if got[1] == "JSONDecodeError":
            assert got[2] == str(exc)
        else:
            assert got[2].startswith(exc.msg + ": char "), (got, str(exc))
    else:
        assert got[1] == type(exc).__name__, (got, exc)


@pytest.fixture(scope="module")
def child() -> dict:
    cases = {
        "loads": loads_cases(),
        "rejected": REJECTED,
        "syntax": SYNTAX,
        "dumps": [RESULT, ERROR, ODD_VALUES, *(json.loads(c) for c in example_configs())],
    }
    proc = subprocess.run(
        [sys.executable, "-I", "-c", CHILD.replace("REPO", repr(str(REPO)))],
        input=marshal.dumps(cases),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return marshal.loads(proc.stdout)  # noqa: S302 - our own child's output


def test_the_json_package_is_never_imported(child):
    assert not set(JSON_MODULES) & set(child["loaded"]), child["loaded"]
    # `from __future__ import annotations` imports the (tiny) __future__ module at run time; it is
    # in the list unless something at start-up loaded it first (an editable install's finder
    # does), so it is allowed either way.
    assert set(child["loaded"]) <= {
        "__future__",
        "_json",
        "cni_delguard",
        "cni_delguard.cni",
        "cni_delguard.cni.jsonlite",
    }


def test_configs_and_results_parse_as_json_parses_them(child):
    for data, got in zip(loads_cases(), child["loads"], strict=True):
        assert got == ("ok", json.loads(data)), data[:80]


def test_dumps_prints_what_json_prints(child):
    values = [RESULT, ERROR, ODD_VALUES, *(json.loads(c) for c in example_configs())]
    for value, (plain, stable) in zip(values, child["dumps"], strict=True):
        assert plain == ("ok", json.dumps(value))
        assert stable == ("ok", json.dumps(value, sort_keys=True, separators=(",", ":")))


def test_objects_json_has_no_type_for(child):
    as_str, rejected = child["opaque"]
    assert as_str == ("ok", '{"obj": "<opaque>"}')
    assert rejected[:2] == ("error", "TypeError")
    assert "Opaque" in rejected[2]


def test_malformed_input_is_rejected_without_json(child):
    for data, got in zip(REJECTED, child["rejected"], strict=True):
        check_rejection(data, got)
        assert got[1] != "JSONDecodeError"  # json.decoder was not there to raise it


def test_syntax_errors_inside_a_value(child):
    """The one path that may import json (when `_json` needs JSONDecodeError)."""
    for data, got in zip(SYNTAX, child["syntax"], strict=True):
        check_rejection(data, got)
    kinds = {got[1] for got in child["syntax"]}
    assert "JSONDecodeError" in kinds, "no case took json's path: SYNTAX tests nothing new"
    assert "json.decoder" in child["loaded_after_syntax"]
