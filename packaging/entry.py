"""The frozen executable's entry point: the same `run` as the console script and `python -m`."""

from __future__ import annotations

from cni_delguard.cli import run

run()
