"""What a bug report may carry of a CNI conf, a log record or a tool's output: pure functions.

Two rules, applied in this order:

- `conf`: of a CNI conf, the fields the CNI spec defines and the guard's own keep their values;
  every other plugin's field (multus' `delegates` and `kubeconfig`, kube-ovn's `server_socket`,
  a vendor's credentials) is kept by name only, its value replaced by OMITTED, unless the
  operator asks for plugin config (`bugreport --include-plugin-config`).
- `secrets`, on everything that goes into the report, kept values included: a key that names a
  token, password, key or certificate has its value replaced by REDACTED, and so does any string
  that looks like one (a PEM block, a JWT, a bearer or basic credential, a URL's password, a
  `password=...` pair, a long mixed-case base64 run); a string that holds JSON is parsed and
  redacted inside. Container IDs and digests (lowercase hex) are kept: they are what a maintainer
  matches records by.

The spec's fields: CNI spec 1.1.0, SPEC.md, "Network configuration format" (network: cniVersion,
cniVersions, name, disableCheck, disableGC, plugins; plugin: type, capabilities, and the
well-known ipam and dns; the runtime's runtimeConfig, args, prevResult).
"""

from __future__ import annotations

import json
import re
from typing import Any

OMITTED = "<omitted: plugin field; bugreport --include-plugin-config shows it>"
REDACTED = "<redacted>"

NETWORK_KEYS = frozenset({"cniVersion", "cniVersions", "name", "disableCheck", "disableGC"})
PLUGIN_KEYS = frozenset({"type", "capabilities", "runtimeConfig", "args", "prevResult"})
IPAM_KEYS = frozenset({"type"})
DNS_KEYS = frozenset({"nameservers", "domain", "search", "options"})
# The guard's own keys (guard/models.py GuardConf; tests/unit/test_redact.py keeps them equal).
GUARD_KEYS = frozenset({
    "delegate", "stateDir", "resultCacheDirs", "multusCacheDirs", "timeouts", "lockTimeout",
    "logFile", "logLevel", "mode",
})
GUARD_TYPE = "cni-delguard"

_SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)?|secret|token|credential|auth|bearer|cookie|session|"
    r"(^|[^a-z])key|key($|[^a-z])|apikey|private|cert|\bpem\b|signature",
    re.IGNORECASE,
)
_SECRET_VALUES = (
    re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*?(-----END [A-Z0-9 ]+-----|\Z)", re.DOTALL),
    re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}(\.[A-Za-z0-9_-]*)?"),
    re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{6,}"),
    re.compile(r"(?<=://)[^/@\s:]*:[^/@\s]*(?=@)"),
    re.compile(
        r"(?i)(?<![A-Za-z0-9])((?:[a-z0-9]+[_-])*(?:pass(?:word|wd)?|secret|token|"
        r"api[_-]?key|private[_-]?key|credentials?|auth))"
        r"(\"?\s*[=:]\s*\"?)([^\s\"',;&}]+)"
    ),
    re.compile(r"(?<![A-Za-z0-9+/_-])(?=[A-Za-z0-9+/_-]*[A-Z])(?=[A-Za-z0-9+/_-]*[a-z])"
               r"(?=[A-Za-z0-9+/_-]*[0-9])[A-Za-z0-9+/_-]{32,}={0,2}"),
)
_PAIR = 4  # the index of the `name=value` pattern above: its name is kept, its value not


def secret_key(key: str) -> bool:
    """Whether a key's name says its value is a secret (token, password, key, certificate)."""
    return bool(_SECRET_KEY.search(key))


def text(value: str) -> str:
    """A string with every secret-looking part replaced; JSON inside is redacted as JSON."""
    stripped = value.strip()
    if stripped[:1] in ("{", "[") and len(stripped) > 1:
        try:
            inner = json.loads(stripped)
        except ValueError:
            pass
        else:
            return json.dumps(secrets(inner), sort_keys=True)
    for i, pattern in enumerate(_SECRET_VALUES):
        if i == _PAIR:
            value = pattern.sub(lambda m: m.group(1) + m.group(2) + REDACTED, value)
        else:
            value = pattern.sub(REDACTED, value)
    return value


def secrets(value: Any) -> Any:
    """`value` (JSON-like) with every secret key's value and every secret-looking string
    redacted, at any depth; keys are kept (a secret-looking key name is itself redacted)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = text(str(k))
            out[key] = REDACTED if secret_key(str(k)) and v not in (None, "", [], {}) else (
                secrets(v)
            )
        return out
    if isinstance(value, list):
        return [secrets(v) for v in value]
    if isinstance(value, str):
        return text(value)
    return value


def conf(value: Any, include_plugin_config: bool = False) -> Any:
    """A CNI conf (a conflist or a single plugin's conf) as a report carries it: `secrets`
    always, other plugins' fields by name only unless `include_plugin_config`."""
    if include_plugin_config or not isinstance(value, dict):
        return secrets(value)
    if isinstance(value.get("plugins"), list):
        kept = {k: v for k, v in value.items() if k in NETWORK_KEYS}
        others = {k: OMITTED for k in value if k not in NETWORK_KEYS and k != "plugins"}
        plugins = [_plugin(p) for p in value["plugins"]]
        return secrets({**kept, **others, "plugins": plugins})
    return secrets(_plugin(value, network=True))


def _plugin(value: Any, network: bool = False) -> Any:
    if not isinstance(value, dict):
        return OMITTED
    guard = value.get("type") == GUARD_TYPE
    out: dict[str, Any] = {}
    for k, v in value.items():
        if k == "delegate" and guard:
            out[k] = _plugin(v)
        elif k == "ipam":
            out[k] = _only(v, IPAM_KEYS)
        elif k == "dns":
            out[k] = _only(v, DNS_KEYS)
        elif k in PLUGIN_KEYS or (network and k in NETWORK_KEYS) or (guard and k in GUARD_KEYS):
            out[k] = v
        else:
            out[k] = OMITTED
    return out


def _only(value: Any, keys: frozenset[str]) -> Any:
    if not isinstance(value, dict):
        return OMITTED
    return {k: (v if k in keys else OMITTED) for k, v in value.items()}
