"""The rule of each guard config field, without pydantic: one place for models.py (the schema)
and verdict.py (which re-derives the settings from a config whenever a stored verdict is read).

Each rule takes the value as JSON gave it and returns the normalized value, or raises FieldError.
"""

from __future__ import annotations

import os

from cni_delguard import PLUGIN_TYPE
from cni_delguard.cni.skel import MAX_NETWORK, valid_network

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LOG_LEVELS = ("debug", "info", "warning", "error")
MODES = ("enforce", "observe")
TIMEOUT_KEYS = ("add", "del", "check", "gc", "status")
MAX_SECONDS = 3600


class FieldError(ValueError):
    """A value a field's rule refuses (a ValueError: what pydantic turns into its own error)."""


def absolute(value: str) -> str:
    if not value.startswith("/") or "\0" in value:
        raise FieldError("must be an absolute path")
    return os.path.normpath(value)


def log_file(value: str) -> str:
    return value if value == "" else absolute(value)


def network(value: str) -> str:
    if not valid_network(value):
        raise FieldError(
            f"network name: at most {MAX_NETWORK} characters, an alphanumeric first, "
            "then alphanumerics, '_', '.', '-'"
        )
    return value


def plugin_type(value: str) -> str:
    if value in ("", ".", "..") or "/" in value or "\0" in value:
        raise FieldError("plugin type must be a plain file name in CNI_PATH")
    if value == PLUGIN_TYPE:
        raise FieldError("cni-delguard cannot delegate to itself")
    return value


def seconds(value: object) -> float:
    """A strict number of seconds in (0, MAX_SECONDS]: an int or a float, never a bool."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FieldError("must be a number")
    if not 0 < value <= MAX_SECONDS:
        raise FieldError(f"must be more than 0 and at most {MAX_SECONDS}")
    return float(value)


def text(value: object) -> str:
    if not isinstance(value, str):
        raise FieldError("must be a string")
    return value


def choice(value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise FieldError(f"must be one of {', '.join(allowed)}")
    return text(value)


def flags(value: object) -> dict[str, bool]:
    """A capabilities object: string keys, boolean values."""
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, bool) for k, v in value.items()
    ):
        raise FieldError("must be an object of booleans")
    return value


def paths(value: object) -> list[str]:
    if not isinstance(value, list):
        raise FieldError("must be a list of absolute paths")
    return [absolute(text(v)) for v in value]


def settings(conf: dict[str, Any], filled: dict[str, Any]) -> dict[str, Any]:
    """The normalized settings of `conf` (completed with `filled`, the defaults as config keys),
    as models.validate returns them, each field through its rule above; ValueError for a config
    the rules refuse. The shapes pydantic checks beyond the settings (`type`, `capabilities`,
    `runtimeConfig`, `prevResult`) are checked too, so nothing a config may not say passes here.
    """
    def given(key: str) -> Any:
        return conf.get(key, filled.get(key))

    if conf.get("type") != PLUGIN_TYPE:
        raise FieldError("type")
    delegate = conf.get("delegate")
    if not isinstance(delegate, dict):
        raise FieldError("delegate")
    flags(conf.get("capabilities", {}))
    if not isinstance(conf.get("runtimeConfig", {}), dict):
        raise FieldError("runtimeConfig")
    if not isinstance(conf.get("prevResult", {}), (dict, type(None))):
        raise FieldError("prevResult")
    timeouts = given("timeouts")
    if not isinstance(timeouts, dict) or set(timeouts) - set(TIMEOUT_KEYS):
        raise FieldError("timeouts")
    timeouts = {**filled["timeouts"], **timeouts}
    caps = flags(delegate.get("capabilities", {}))
    return {
        "network": network(text(conf.get("name"))),
        "cniVersion": text(conf.get("cniVersion")),
        "stateDir": absolute(text(given("stateDir"))),
        "resultCacheDirs": paths(given("resultCacheDirs")),
        "multusCacheDirs": paths(given("multusCacheDirs")),
        "timeouts": {k: seconds(timeouts[k]) for k in TIMEOUT_KEYS},
        "lockTimeout": seconds(given("lockTimeout")),
        "logFile": log_file(text(given("logFile"))),
        "logLevel": choice(given("logLevel"), LOG_LEVELS),
        "delegateType": plugin_type(text(delegate.get("type"))),
        "delegateCapabilities": sorted(k for k, v in caps.items() if v),
        "mode": choice(conf.get("mode", MODES[0]), MODES),
    }
