"""What only the tools and the tests need: never imported by cni_delguard, never frozen.

The frozen bundle (packaging/cni-delguard.spec) collects cni_delguard alone; this package holds
what turns the rules' template into the files the manifests carry. tools/render-rules.py runs it;
tests/unit checks it.

| module | job |
| --- | --- |
| `rules.py` | the alerting and recording rules, rendered from their template |
"""
