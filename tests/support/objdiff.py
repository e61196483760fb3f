"""Kubernetes objects compared field by field, after the normalization that makes two renders
of the same objects equal: what the chart renders against what an overlay renders, and what one
chart version renders against another.

Normalized away, and nothing else:
- the labels only Helm adds (HELM_LABELS: its chart, release and version labels);
- the order of lists whose items are named (containers, volumes, volumeMounts, ports, env, ...):
  the API server treats them as maps keyed by name. Other lists (args, commands, tolerations)
  keep their order: it is meaningful.
"""

from __future__ import annotations

import copy
from typing import Any

HELM_LABELS = frozenset(
    {
        "helm.sh/chart",
        "app.kubernetes.io/managed-by",
        "app.kubernetes.io/instance",
        "app.kubernetes.io/version",
    }
)


def normalize(doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    meta = doc.get("metadata", {})
    labels = {k: v for k, v in meta.get("labels", {}).items() if k not in HELM_LABELS}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    return _sort_named(doc)


def _sort_named(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sort_named(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_sort_named(v) for v in value]
        if items and all(isinstance(v, dict) and "name" in v for v in items):
            return sorted(items, key=lambda v: str(v["name"]))
        return items
    return value


def key(doc: dict) -> str:
    return f"{doc['kind']}/{doc['metadata']['name']}"


def diff(left: Any, right: Any, path: str = "") -> list[str]:
    """Every field where two values differ, as `path: left != right` (a missing field shows as
    <absent>); empty when they are equal."""
    if isinstance(left, dict) and isinstance(right, dict):
        found = []
        for k in sorted(left.keys() | right.keys(), key=str):
            found += diff(left.get(k, _ABSENT), right.get(k, _ABSENT), f"{path}.{k}")
        return found
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        found = []
        for i, (a, b) in enumerate(zip(left, right, strict=True)):
            found += diff(a, b, f"{path}[{i}]")
        return found
    if left == right and type(left) is type(right):
        return []
    return [f"{path or '.'}: {_show(left)} != {_show(right)}"]


def diff_objects(left: list[dict], right: list[dict]) -> list[str]:
    """diff() of two sets of objects, each normalized, matched by kind and name."""
    a = {key(d): normalize(d) for d in left}
    b = {key(d): normalize(d) for d in right}
    return diff(a, b)


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT = _Absent()


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."
