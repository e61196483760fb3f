"""The guard's timeouts from the node's kubelet, so that none of them fires before the kubelet
gives up on the call (the rule and its sources: docs/how-it-decides.md, "Timeouts").

The kubelet bounds every CRI call by its `runtimeRequestTimeout` and RunPodSandbox by twice that
(k8s.io/cri-client v0.35.4 pkg/remote_runtime.go, RunPodSandbox: "Use 2 times longer timeout
for sandbox operation"); its default is 2m, and a zero value means the default (kubernetes
v1.35.4 pkg/kubelet/apis/config/v1beta1/defaults.go). The guard's defaults (guard/defaults.py)
are the deadlines of that default; a node whose kubelet waits longer gets longer timeouts here.

Where the value is read: the KubeletConfiguration file (kubeadm's /var/lib/kubelet/config.yaml
unless `--kubelet-config` names another; YAML or JSON), one top-level scalar key, without a
YAML library. The kubelet's `--runtime-request-timeout` flag wins over that file, but a flag is
on the kubelet's command line, which the installer cannot see from its pod (no host PID
namespace) and which comes from places no one list covers (systemd drop-ins, kubeadm-flags.env,
/etc/default/kubelet, a distribution's own wrapper): the installer's own
`--runtime-request-timeout` says it instead, and is taken over the file. Anything missing or
unreadable leaves the guard's defaults, and the installer says why.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from cni_delguard.guard import defaults
from cni_delguard.host.root import OutsideRootError, as_root
from cni_delguard.tooling import UsageError

CONFIG = "/var/lib/kubelet/config.yaml"  # kubeadm's `--config` (kubeadm's kubelet drop-in)
KEY = "runtimeRequestTimeout"
KUBELET_DEFAULT = 120.0  # seconds: "2m", KubeletConfiguration's documented default
MAX_TIMEOUT = 3600.0  # the guard's model accepts no timeout above an hour (guard/models.py)
_MAX_BYTES = 1 << 20  # a KubeletConfiguration is a few KiB

# Go's time.ParseDuration: an optional sign, then number-unit pairs ("1h2m3.5s"), or a bare 0.
_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0,
          "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_SCALAR = re.compile(r"^(['\"]?)([^'\"#]*?)\1\s*(?:#.*)?$")


@dataclass(frozen=True)
class Reading:
    """The timeouts to write into the guard's conf (only those above the guard's defaults) and
    one line saying where they came from, or why the defaults stay."""

    keys: dict[str, Any]
    note: str


def parse_duration(text: str) -> float | None:
    """Seconds of a Go duration string ("2m", "90s", "1h2m3s", "0"), None when it is not one."""
    body = text.strip()
    sign = -1.0 if body.startswith("-") else 1.0
    body = body[1:] if body.startswith(("-", "+")) else body
    if body == "0":
        return 0.0
    if not body:
        return None
    total, at = 0.0, 0
    for match in _PART.finditer(body):
        if match.start() != at:
            return None
        total += float(match.group(1)) * _UNITS[match.group(2)]
        at = match.end()
    return sign * total if at == len(body) else None


def top_level_scalar(text: str, key: str) -> str | None:
    """The value of a top-level `key` of a YAML or JSON document as a string; None when the key
    is absent, given twice, or not a plain scalar (its value is then not ours to guess)."""
    if text.lstrip().startswith("{"):
        try:
            body = json.loads(text)
        except ValueError:
            return None
        value = body.get(key) if isinstance(body, dict) else None
        return value if isinstance(value, str) else None
    found = [line[len(key) + 1:] for line in text.splitlines() if line.startswith(f"{key}:")]
    if len(found) != 1:
        return None
    match = _SCALAR.match(found[0].strip())
    return match.group(2).strip() if match else None


def deadlines(runtime_request_timeout: float) -> dict[str, float]:
    """What the kubelet waits for each call the guard serves: ADD runs in RunPodSandbox (twice
    the timeout); DEL in StopPodSandbox and RemovePodSandbox; STATUS in the runtime's Status;
    CHECK and GC are called by no kubelet path, and get the plain runtime request timeout."""
    rrt = runtime_request_timeout
    return {"add": 2 * rrt, "del": rrt, "check": rrt, "gc": rrt, "status": rrt}


def timeouts(runtime_request_timeout: float) -> dict[str, float]:
    """The guard's timeouts for a kubelet with this runtime request timeout: its deadline where
    that is longer than the guard's default (never shorter: a default also covers callers other
    than the kubelet), at most MAX_TIMEOUT; only the keys that differ from the defaults."""
    wanted = deadlines(runtime_request_timeout)
    return {key: min(MAX_TIMEOUT, seconds) for key, seconds in wanted.items()
            if seconds > defaults.TIMEOUTS[key]}


def read(root: str, path: str, given: str | None = None) -> Reading:
    """The guard keys for the kubelet of the node under `root`: `given` (the installer's
    `--runtime-request-timeout`) when set, else the kubelet config file at `path` (as the node
    names it; '' reads none)."""
    if given is not None:
        seconds = parse_duration(given)
        if seconds is None or seconds <= 0:
            raise UsageError(f"--runtime-request-timeout {given!r} is not a positive duration")
        return _reading(seconds, "--runtime-request-timeout")
    if not path:
        return Reading({}, "kubelet config not read (--kubelet-config ''): default timeouts")
    found, where = from_file(root, path)
    if found is None:
        return Reading({}, f"{where}: default timeouts")
    return _reading(found, where)


def from_file(root: str, path: str) -> tuple[float | None, str]:
    """The runtime request timeout (seconds) that the kubelet config file at `path` gives the
    kubelet, and where it came from; (None, why) when that cannot be told."""
    text, why = _text(root, path)
    if text is None:
        return None, why
    value = top_level_scalar(text, KEY)
    if value is None:
        if KEY not in text:  # the kubelet's default: the one the guard's defaults are made for
            return KUBELET_DEFAULT, f"{path} (no {KEY}: the kubelet's default)"
        return None, f"kubelet config {path}: no single plain {KEY} at its top level"
    seconds = parse_duration(value)
    if seconds is None or seconds < 0:
        return None, f"kubelet config {path}: {KEY} {value!r} is not a duration"
    if seconds == 0:  # a zero Duration is defaulted by the kubelet (kubeadm writes "0s")
        return KUBELET_DEFAULT, f"{path} ({KEY} {value}: the kubelet's default)"
    return seconds, f"{path} ({KEY} {value})"


def _text(root: str, path: str) -> tuple[str | None, str]:
    """The file's text (no link followed at any component, at most _MAX_BYTES), or None and
    why."""
    try:
        text = as_root(root).read(path, _MAX_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError, OutsideRootError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return None, f"kubelet config {path} not read ({why})"
    if not text.strip():
        return None, f"kubelet config {path} is empty (not this node's kubelet's)"
    return text, ""


def _reading(seconds: float, source: str) -> Reading:
    keys = timeouts(seconds)
    merged = {**defaults.TIMEOUTS, **keys}
    said = ", ".join(f"{k} {v:g} s" for k, v in merged.items())
    capped = " (capped at the guard's maximum)" if any(
        v >= MAX_TIMEOUT for v in keys.values()) else ""
    return Reading({"timeouts": keys} if keys else {},
                   f"kubelet runtime request timeout {seconds:g} s from {source}: "
                   f"guard timeouts {said}{capped}")


def add_options(parser: Any) -> None:
    """`install`'s options for the kubelet's deadlines."""
    parser.add_argument(
        "--kubelet-config",
        default=CONFIG,
        metavar="PATH",
        help="the kubelet's KubeletConfiguration file on the node, read for its "
        f"{KEY} to set the guard's timeouts ('' reads none) (%(default)s)",
    )
    parser.add_argument(
        "--runtime-request-timeout",
        metavar="DURATION",
        help="the kubelet's --runtime-request-timeout when its command line sets one (wins "
        "over --kubelet-config), e.g. 5m",
    )
