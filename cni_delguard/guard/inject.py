"""The delegate's stdin: its own config as the user wrote it, plus what the spec says to inject.

Models are for reading and validating; the delegate's config is never re-serialized through them.
Unknown keys stay. `name` and `cniVersion` are the network's (as libcni injects them into every
plugin of a list), `runtimeConfig` carries only what the delegate's own `capabilities` ask for,
`prevResult` and GC's valid-attachments pass through as the runtime gave them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cni_delguard.guard.config import Settings

VALID_ATTACHMENTS = "cni.dev/valid-attachments"


def delegate_conf(conf: dict[str, Any], settings: Settings, with_prev_result: bool = True) -> bytes:
    out: dict[str, Any] = dict(conf["delegate"])
    out["name"] = settings.network
    out["cniVersion"] = settings.cni_version
    runtime = conf.get("runtimeConfig") or {}
    wanted = {k: v for k, v in runtime.items() if k in settings.delegate_capabilities}
    if wanted:
        out["runtimeConfig"] = wanted
    if with_prev_result and "prevResult" in conf:
        out["prevResult"] = conf["prevResult"]
    if VALID_ATTACHMENTS in conf:
        out[VALID_ATTACHMENTS] = conf[VALID_ATTACHMENTS]
    from cni_delguard.cni import jsonlite

    return jsonlite.dumps(out).encode("utf-8", "surrogatepass")
