"""The metrics of cni-delguard, in one place: what is exported, where each value comes from, and
how it is served (the watcher's endpoint and textfile) or written (`stats --prometheus`).

Above ops/ and node/ (it reads the log and the markers through ops/, the ready check and the
watcher's counts through node/); the watcher (cni_delguard/watcher.py, above it) starts its
exporter, and `cni_delguard.cli` connects its textfile to `stats --prometheus`. One module per
job:

| module | job |
| --- | --- |
| `series.py` | every exported series, declared once: name, kind, help, labels, vocabularies |
| `counts.py` | the decision log folded into the counters, one record at a time, bounded |
| `metrics.py` | the values from the log and the markers; `stats --prometheus`'s textfile |
| `exposition.py` | prometheus-client: the text and OpenMetrics a scraper reads (only to render) |
| `feed.py` | the watcher's values: the log read incrementally, the ready check, its counts |
| `exporter.py` | the watcher's metrics thread and options: refresh, textfile, endpoint |
| `endpoint.py` | the scrape endpoint: a bounded HTTP/1.0 server for `GET /metrics` |
"""

from __future__ import annotations
