"""A real Alertmanager (Debian's prometheus-alertmanager, tools/install-deps.sh test) for one test:
its own config, data dir and port on loopback, stopped when the test ends, pass or fail; the
package's own service is never used or started. `api` speaks its v2 API."""

from __future__ import annotations

import contextlib
import json
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.daemon import Answer, Daemon, free_port, http_ready


@contextlib.contextmanager
def running(workdir: Path, config: dict) -> Iterator[str]:
    """Alertmanager with `config`; yields its URL."""
    binary = shutil.which("prometheus-alertmanager")
    if binary is None:
        pytest.fail("no Alertmanager: tools/install-deps.sh test installs Debian's")
    port = free_port()
    path = workdir / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config))
    url = f"http://127.0.0.1:{port}"
    manager = Daemon(
        "Alertmanager",
        [binary, f"--config.file={path}", f"--storage.path={workdir / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
        workdir / "alertmanager.log",
        ready=Answer(lambda: http_ready(f"{url}/-/ready"), "200 on /-/ready"))
    try:
        manager.start()
        yield url
    finally:
        manager.stop()


def api(url: str, path: str, body: object | None = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{url}/api/v2/{path}", data=data,  # noqa: S310 - loopback
                                 method="POST" if data else "GET",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310 - loopback
        raw = r.read()
    return json.loads(raw) if raw else None
