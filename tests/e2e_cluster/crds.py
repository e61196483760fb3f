"""STAND-IN CRDs, for tests only: prometheus-operator's PodMonitor and PrometheusRule
(monitoring.coreos.com/v1), so that the monitoring overlay's objects can be applied to the real
API server as they are on a cluster that runs the operator.

prometheus-operator's own CRDs (its repository's example/prometheus-operator-crd/) carry the full
OpenAPI schema of each kind; nothing installable here ships them, and the operator itself (which
would act on them) is not part of these tests. These keep the group, versions, kinds, names and
scope and accept any spec (x-kubernetes-preserve-unknown-fields): the API server stores what the
overlay sends, and what is checked is that the overlay applies and the DaemonSet behaves the same
with it. The objects' own schema is checked offline by tests/installer/test_manifests.py.
"""

from __future__ import annotations

from typing import Any

GROUP = "monitoring.coreos.com"


def _crd(kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                           "listKind": f"{kind}List"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


def prometheus_operator() -> list[dict[str, Any]]:
    return [_crd("PodMonitor", "podmonitors"), _crd("PrometheusRule", "prometheusrules")]
