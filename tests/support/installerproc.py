"""The installer as a process, as the DaemonSet runs it: the frozen binary (or the package with
DELGUARD_UNDER_TEST=package), one-shot commands on a fake node, and `install --watch`."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support import guard
from tests.support.daemon import Daemon


def command() -> list[str]:
    if guard.under_test() == "frozen":
        return [str(guard.frozen_binary())]
    return [sys.executable, "-m", "cni_delguard"]


def installer(node: Any, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`cni-delguard ARGV[0]` with the node's path flags and ARGV[1:]."""
    return subprocess.run(
        [*command(), *argv[:1], *node.args(*argv[1:])],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class WatchProc:
    """`install --watch` as a process; its stdout (the container log) collected in a file. Not
    awaited when started: each test waits for what the watcher does on its node."""

    def __init__(self, node: Any, tmp: Path, *extra: str) -> None:
        self.log = tmp / f"watch-{time.monotonic_ns()}.log"
        argv = [*command(), "install", *node.args("--watch", "--watch-interval", "0.2", *extra)]
        self.proc = Daemon("install --watch", argv, self.log)
        self.proc.start(wait=False)

    def text(self) -> str:
        return self.log.read_text()

    def stop(self) -> int | None:
        """SIGTERM, as the pod's deletion sends; its exit status."""
        return self.proc.stop()
