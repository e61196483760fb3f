"""The one schema of the guard's config (pydantic v2).

Imported only when a config has to be validated: pydantic costs ~100 ms of start-up, so config.py
validates a given config once and keeps the verdict in the state dir for later execs.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from cni_delguard import PLUGIN_TYPE
from cni_delguard.cni import errors
from cni_delguard.cni.skel import MAX_NETWORK, valid_network
from cni_delguard.guard import defaults


def _absolute(value: str) -> str:
    if not value.startswith("/") or "\0" in value:
        raise ValueError("must be an absolute path")
    return os.path.normpath(value)


def _log_file(value: str) -> str:
    return value if value == "" else _absolute(value)


def _network(value: str) -> str:
    if not valid_network(value):
        raise ValueError(
            f"network name: at most {MAX_NETWORK} characters, an alphanumeric first, "
            "then alphanumerics, '_', '.', '-'"
        )
    return value


def _plugin_type(value: str) -> str:
    if value in ("", ".", "..") or "/" in value or "\0" in value:
        raise ValueError("plugin type must be a plain file name in CNI_PATH")
    if value == PLUGIN_TYPE:
        raise ValueError("cni-delguard cannot delegate to itself")
    return value


AbsPath = Annotated[str, AfterValidator(_absolute)]
Seconds = Annotated[float, Field(gt=0, le=3600)]


class Timeouts(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    add: Seconds = defaults.TIMEOUTS["add"]
    del_: Seconds = Field(defaults.TIMEOUTS["del"], alias="del")
    check: Seconds = defaults.TIMEOUTS["check"]
    gc: Seconds = defaults.TIMEOUTS["gc"]
    status: Seconds = defaults.TIMEOUTS["status"]


class DelegateConf(BaseModel):
    """Only what the guard reads; every other key is the delegate's and is forwarded as given."""

    model_config = ConfigDict(extra="allow", strict=True)

    type: Annotated[str, AfterValidator(_plugin_type)]
    capabilities: dict[str, bool] = Field(default_factory=dict)


class GuardConf(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    cniVersion: str  # noqa: N815 - CNI's own key names
    name: Annotated[str, AfterValidator(_network)]
    type: Literal["cni-delguard"]
    delegate: DelegateConf
    stateDir: AbsPath = defaults.STATE_DIR  # noqa: N815
    resultCacheDirs: list[AbsPath] = Field(  # noqa: N815
        default_factory=lambda: list(defaults.RESULT_CACHE_DIRS)
    )
    multusCacheDirs: list[AbsPath] = Field(  # noqa: N815
        default_factory=lambda: list(defaults.MULTUS_CACHE_DIRS)
    )
    timeouts: Timeouts = Field(default_factory=lambda: Timeouts.model_validate({}))
    lockTimeout: Seconds = defaults.LOCK_TIMEOUT  # noqa: N815
    logFile: Annotated[str, AfterValidator(_log_file)] = defaults.LOG_FILE  # noqa: N815
    logLevel: Literal["debug", "info", "warning", "error"] = "info"  # noqa: N815
    mode: Literal["enforce", "observe"] = "enforce"  # defaults.MODE
    capabilities: dict[str, bool] = Field(default_factory=dict)
    runtimeConfig: dict[str, Any] = Field(default_factory=dict)  # noqa: N815
    prevResult: dict[str, Any] | None = None  # noqa: N815


def validate(conf: dict[str, Any]) -> dict[str, Any]:
    """Validate a guard config; return the normalized settings config.Settings is built from."""
    try:
        model = GuardConf.model_validate(conf)
    except ValidationError as exc:
        raise errors.CniError(
            errors.INVALID_CONFIG, "invalid cni-delguard configuration", _summary(exc)
        ) from None
    return {
        "network": model.name,
        "cniVersion": model.cniVersion,
        "stateDir": model.stateDir,
        "resultCacheDirs": model.resultCacheDirs,
        "multusCacheDirs": model.multusCacheDirs,
        "timeouts": model.timeouts.model_dump(by_alias=True),
        "lockTimeout": model.lockTimeout,
        "logFile": model.logFile,
        "logLevel": model.logLevel,
        "delegateType": model.delegate.type,
        "delegateCapabilities": sorted(k for k, v in model.delegate.capabilities.items() if v),
        "mode": model.mode,
    }


def _summary(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "(config)"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)
