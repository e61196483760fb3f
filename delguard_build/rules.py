"""The alerting and recording rules, rendered from their one template for a scrape interval, a
cluster label and a namespace (the kube-prometheus mixins' settings, as data).

The template is installer/kustomize/components/monitoring/prometheusrule.template.yaml. Two
renderers fill in its tokens: this one (tools/render-rules.py writes a kustomize overlay's rules
with it) and the Helm chart's (charts/cni-delguard/templates/_helpers.tpl, "cni-delguard.rules");
tests/installer/test_chart.py renders both for the same settings and compares the objects.

| token | becomes |
| --- | --- |
| `${4i}` | four scrape intervals, as a Prometheus duration (15s: `1m`; 60s: `4m`) |
| `${40i:seconds}` | the same in seconds (15s: `600`), for a comparison with time() |
| `${interval}` | the scrape interval as set |
| `${cluster}` | the cluster label, or nothing (no cluster label: the default) |
| `${cluster,}` | the cluster label and `, ` (the head of a `by`/`on` list), or nothing |
| `${namespace}` | the namespace the DaemonSet runs in |

Windows are multiples of the interval because what they must hold is samples: four intervals
hold a sample however one scrape fails (a failed scrape leaves a gap of two).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_INTERVAL = "15s"
_DURATION = re.compile(r"(?:[0-9]+[smh])+")
_PART = re.compile(r"([0-9]+)([smh])")
_UNIT = {"s": 1, "m": 60, "h": 3600}
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_TOKEN = re.compile(r"\$\{([0-9]+)i(:seconds)?\}")


class SettingsError(ValueError):
    """A setting the rules cannot be rendered for."""


@dataclass(frozen=True)
class Settings:
    interval: str = DEFAULT_INTERVAL  # the scrape interval: 15s, 1m, 1m30s
    cluster: str = ""  # the label that names the cluster where one ruler serves several
    namespace: str = "kube-system"

    def __post_init__(self) -> None:
        if not _DURATION.fullmatch(self.interval) or seconds(self.interval) == 0:
            raise SettingsError(f"scrape interval {self.interval!r}: a duration such as 15s or 1m")
        if self.cluster and not _LABEL.fullmatch(self.cluster):
            raise SettingsError(f"cluster label {self.cluster!r} is not a Prometheus label name")
        if not _NAMESPACE.fullmatch(self.namespace):
            raise SettingsError(f"namespace {self.namespace!r} is not a Kubernetes namespace name")


def seconds(duration: str) -> int:
    return sum(int(n) * _UNIT[unit] for n, unit in _PART.findall(duration))


def duration(total: int) -> str:
    """Seconds as Prometheus writes them, in the largest unit that divides them (Helm's
    renderer does the same, so the two render the same text)."""
    for unit, size in (("h", 3600), ("m", 60)):
        if total % size == 0:
            return f"{total // size}{unit}"
    return f"{total}s"


def render(template: str, settings: Settings) -> str:
    """The template's text with every token filled in."""
    step = seconds(settings.interval)

    def window(m: re.Match[str]) -> str:
        total = int(m[1]) * step
        return str(total) if m[2] else duration(total)

    text = _TOKEN.sub(window, template)
    head = f"{settings.cluster}, " if settings.cluster else ""
    for token, value in (
        ("${interval}", settings.interval),
        ("${cluster,}", head),
        ("${cluster}", settings.cluster),
        ("${namespace}", settings.namespace),
    ):
        text = text.replace(token, value)
    if "${" in text:
        left = text[text.index("${") :].split("}", 1)[0]
        raise SettingsError(f"the template has a token no renderer knows: {left}}}")
    return text
