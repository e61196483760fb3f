"""The Prometheus exposition of monitoring/series.py, written by prometheus-client, for the
endpoint and the textfile alike: the one place that turns values into the text a scraper reads.

Imported only where metrics are rendered (monitoring/metrics.py imports it inside its functions):
prometheus-client costs 64 ms of imports here (http.server, urllib, its own modules), which the
plugin's exec path and the `ready` probe must never pay.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from cni_delguard.monitoring import series
from cni_delguard.monitoring.series import Histogram

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cni_delguard.monitoring.series import Series, Values


class Snapshot(Collector):
    """The series that `values` has, in the table's order, each label set sorted."""

    def __init__(self, values: Values) -> None:
        self.values = values

    def collect(self) -> Iterator[Metric]:
        for s in series.SERIES:
            samples = self.values.get(s.name)
            if samples is not None:
                yield _family(s, samples)


def _family(s: Series, samples: dict[tuple[str, ...], float | Histogram]) -> Metric:
    name = f"{series.PREFIX}_{s.name}"
    family: CounterMetricFamily | GaugeMetricFamily | InfoMetricFamily | HistogramMetricFamily
    if s.kind == series.INFO:
        family = InfoMetricFamily(name, s.help_text, labels=[])
        for labels in sorted(samples):
            family.add_metric([], dict(zip(s.labels, labels, strict=True)))
        return family
    if s.kind == series.HISTOGRAM:
        family = HistogramMetricFamily(name, s.help_text, labels=list(s.labels))
        for labels, h in sorted(samples.items()):
            assert isinstance(h, Histogram)  # noqa: S101 - the registry's kind says so
            family.add_metric(list(labels), h.cumulative(), h.total)
        return family
    kind = CounterMetricFamily if s.kind == series.COUNTER else GaugeMetricFamily
    family = kind(name, s.help_text, labels=list(s.labels))
    for labels, value in sorted(samples.items()):
        assert not isinstance(value, Histogram)  # noqa: S101 - the registry's kind says so
        family.add_metric(list(labels), value)
    return family


def registry(values: Values, process: bool = False) -> CollectorRegistry:
    """`values` as a registry; `process` adds the library's process_* series (CPU seconds,
    resident memory, open fds of this process: the watcher's own cost, on the endpoint)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(Snapshot(values))
    if process:
        ProcessCollector(registry=reg)
    return reg


def text(values: Values) -> bytes:
    """The text format (0.0.4) that node-exporter's textfile collector reads."""
    return generate_latest(registry(values))


def negotiate(values: Values, accept: str) -> tuple[bytes, str]:
    """(body, content type) in the format the scraper's Accept header prefers (Prometheus asks
    for OpenMetrics first, then text 0.0.4)."""
    encoder, content_type = choose_encoder(accept)
    return encoder(registry(values, process=True)), content_type
