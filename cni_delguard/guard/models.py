"""The one schema of the guard's config (pydantic v2).

Imported only when a config has to be validated: pydantic costs ~100 ms of start-up, so config.py
validates a given config once and keeps the verdict in the state dir for later execs (verdict.py,
which re-derives the settings with the same field rules, fields.py, whenever it reads one).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from cni_delguard.cni import errors
from cni_delguard.guard import fields


def _filled(data: Any, info: ValidationInfo, key: str) -> Any:
    """`data` with the keys it leaves out taken from the defaults given to validate()."""
    if not isinstance(data, dict) or not isinstance(info.context, dict):
        return data  # not an object: the field's own validation says so
    given: dict[str, Any] = info.context[key]
    return {**given, **data}


AbsPath = Annotated[str, AfterValidator(fields.absolute)]
Seconds = Annotated[float, Field(gt=0, le=fields.MAX_SECONDS)]


class Timeouts(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    add: Seconds
    del_: Seconds = Field(alias="del")
    check: Seconds
    gc: Seconds
    status: Seconds

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any, info: ValidationInfo) -> Any:
        return _filled(data, info, "timeouts")


class DelegateConf(BaseModel):
    """Only what the guard reads; every other key is the delegate's and is forwarded as given."""

    model_config = ConfigDict(extra="allow", strict=True)

    type: Annotated[str, AfterValidator(fields.plugin_type)]
    capabilities: dict[str, bool] = Field(default_factory=dict)


class GuardConf(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    cniVersion: str  # noqa: N815 - CNI's own key names
    name: Annotated[str, AfterValidator(fields.network)]
    type: Literal["cni-delguard"]
    delegate: DelegateConf
    # No defaults here: validate() passes them in (config.Defaults.conf()), see _defaults below.
    stateDir: AbsPath  # noqa: N815
    resultCacheDirs: list[AbsPath]  # noqa: N815
    multusCacheDirs: list[AbsPath]  # noqa: N815
    timeouts: Timeouts
    lockTimeout: Seconds  # noqa: N815
    logFile: Annotated[str, AfterValidator(fields.log_file)]  # noqa: N815
    logLevel: Literal["debug", "info", "warning", "error"]  # noqa: N815
    mode: Literal["enforce", "observe"] = "enforce"  # defaults.MODE
    capabilities: dict[str, bool] = Field(default_factory=dict)
    runtimeConfig: dict[str, Any] = Field(default_factory=dict)  # noqa: N815
    prevResult: dict[str, Any] | None = None  # noqa: N815

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any, info: ValidationInfo) -> Any:
        return _filled(data, info, "guard")


def validate(conf: dict[str, Any], filled: dict[str, Any]) -> dict[str, Any]:
    """Validate a guard config, completed with `filled`, the defaults as config keys
    (config.Defaults.conf(): the guard's own unless a caller such as a test gives others);
    return the normalized settings config.Settings is built from. A dict, not the Defaults
    object: config.py imports this module, so this one does not import config."""
    context = {"guard": filled, "timeouts": filled["timeouts"]}
    try:
        model = GuardConf.model_validate(conf, context=context)
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
