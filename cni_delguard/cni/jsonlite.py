"""JSON without the `json` package's start-up cost: the same C scanner and encoder, called directly.

`import json` costs ~10 ms per exec (measured: 19.1 ms vs 9.4 ms for a bare interpreter), almost
all of it `re` and `enum`, which json.decoder and json.encoder import at module level to build
regexes that the C accelerator (`_json`) never uses. The plugin is exec'd on every DEL of a
kubelet retry storm, so it drives `_json` itself: the same parser and serializer as json.loads
and json.dumps (tests/unit/test_jsonlite.py checks them against each other). Where `_json` is
missing, the plain json module is used.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_WS = " \t\n\r"
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Context:
    """The attributes `_json.make_scanner` reads from a decoder (as json.JSONDecoder has them)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__
    memo: dict[str, str] = {}  # noqa: RUF012 - the C scanner reads it like JSONDecoder's


try:
    from _json import encode_basestring_ascii as _encode_str
    from _json import make_encoder as _make_encoder
    from _json import make_scanner as _make_scanner
except ImportError:  # pragma: no cover - CPython always has _json
    _scan = None
else:
    _scan = _make_scanner(_Context())  # type: ignore[arg-type]  # duck-typed like JSONDecoder


def loads(data: bytes | str) -> Any:
    """json.loads for UTF-8 input; ValueError (or RecursionError) on anything malformed."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    if _scan is None:  # pragma: no cover
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WS))
    try:
        obj, end = _scan(text, start)
    except StopIteration as exc:
        raise ValueError(f"Expecting value: char {exc.value}") from None
    except SystemError:
        # _json raises json.decoder.JSONDecodeError, which it looks up in sys.modules only:
        # before json.decoder is imported, a syntax error surfaces as a SystemError. Malformed
        # input is the rare path, so let json itself say what is wrong (a ValueError).
        import json

        return json.loads(text)
    if text[end:].strip(_WS):
        raise ValueError(f"Extra data: char {end}")
    return obj


def _unserializable(obj: object) -> str:
    return str(obj)


def dumps(
    obj: object, *, sort_keys: bool = False, compact: bool = False, default_str: bool = False
) -> str:
    """json.dumps(obj, sort_keys=..., separators=(",", ":") if compact); `default_str` renders
    objects JSON has no type for as str() instead of raising TypeError."""
    default = _unserializable if default_str else _reject
    key_sep, item_sep = (":", ",") if compact else (": ", ", ")
    if _scan is None:  # pragma: no cover
        import json

        return json.dumps(obj, default=default, sort_keys=sort_keys, separators=(item_sep, key_sep))
    encoder = _make_encoder(
        {}, default, _encode_str, None, key_sep, item_sep, sort_keys, False, True
    )
    return "".join(encoder(obj, 0))


def _reject(obj: object) -> str:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")
