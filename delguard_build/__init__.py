"""What only the tools and the tests need: never imported by cni_delguard, never frozen.

The frozen bundle (packaging/cni-delguard.spec) collects cni_delguard alone; this package holds
what turns the matrix of record and the rules' template into the files the product and the pages
carry. tools/render.py runs it (generated.py lists what it writes); tests/unit checks it.

| module | job |
| --- | --- |
| `matrix.py` | the matrix: rows, vocabularies, the file's shape, the file of record (matrix.json) |
| `chains.py` | the chains the matrix ran, one row each, and what each stands for |
| `verdict.py` | the derivation: one range and one chain -> what sticks, what is freed; its prose |
| `verdicts.py` | every range and chain's verdict as the data file `cni-delguard assess` ships |
| `render.py` | the Markdown of README's and docs/compatibility.md's tables |
| `rules.py` | the alerting and recording rules, rendered from their template |
| `keys.py` | docs/configuration.md's keys table, rendered from the config model |
| `generated.py` | every generated file and what it should hold, by group (tools/render.py) |
"""
