"""`python -m cni_delguard`: the same entry point as the console script and the frozen binary."""

from __future__ import annotations

from cni_delguard.cli import run

run()
