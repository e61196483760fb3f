"""A real OCI registry for the chart's push and pull: Debian's docker-registry (distribution
2.8), unpacked under .cache/ by tools/unpack-deb.sh (tools/test.sh runs it; DOCKER_REGISTRY
overrides), never installed as the system's service.

Each one listens on loopback on a port the kernel picks (its log names it), or on the address it
is given (a node's own loopback: tests/e2e_cluster/publish.py runs it in the node's network
namespace, `netns` the argv prefix that enters it), stores in the dir it is given (a test's temp
dir), and is stopped when the `with` block ends, also on failure.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.support.daemon import Daemon, LogLine

REPO = Path(__file__).resolve().parents[2]
CONFIG = """\
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: {root}
http:
  addr: {addr}
"""
LISTENING = re.compile(r'msg="listening on (127\.0\.0\.1:\d+)"')


def binary() -> Path | None:
    found = Path(
        os.environ.get("DOCKER_REGISTRY") or REPO / ".cache/docker-registry/usr/bin/docker-registry"
    )
    return found if os.access(found, os.X_OK) else None


@contextmanager
def running(exe: Path, where: Path, addr: str = "127.0.0.1:0",
            netns: Sequence[str] = ()) -> Iterator[str]:
    """A registry serving from `where` (in the network namespace `netns` enters, if any); yields
    its host:port (as its log says it listens)."""
    where.mkdir(parents=True, exist_ok=True)
    config = where / "config.yml"
    config.write_text(CONFIG.format(root=where / "data", addr=addr), encoding="utf-8")
    log = where / "registry.log"
    registry = Daemon("the registry", [*netns, str(exe), "serve", str(config)], log,
                      ready=LogLine(log, LISTENING.pattern, "it listens"))
    try:
        said = registry.start()
        assert isinstance(said, re.Match)
        yield said.group(1)
    finally:
        registry.stop()
