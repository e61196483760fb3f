"""A real Alertmanager (Debian's prometheus-alertmanager, tools/install-test-deps.sh) for one test:
its own config, data dir and port on loopback, stopped when the test ends, pass or fail; the
package's own service is never used or started. `api` speaks its v2 API."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.monitoring.prometheus import free_port
from tests.support.waiting import wait_for


@contextlib.contextmanager
def running(workdir: Path, config: dict) -> Iterator[str]:
    """Alertmanager with `config`; yields its URL."""
    binary = shutil.which("prometheus-alertmanager")
    if binary is None:
        pytest.fail("no Alertmanager: tools/install-test-deps.sh installs Debian's")
    port = free_port()
    path = workdir / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config))
    log_path = workdir / "alertmanager.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [binary, f"--config.file={path}", f"--storage.path={workdir / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert proc.poll() is None, log_path.read_text()
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:  # noqa: S310
                return r.status == 200
        except OSError:
            return False

    try:
        wait_for(ready, "Alertmanager to be ready", 60, every=0.2)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def api(url: str, path: str, body: object | None = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{url}/api/v2/{path}", data=data,  # noqa: S310 - loopback
                                 method="POST" if data else "GET",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310 - loopback
        raw = r.read()
    return json.loads(raw) if raw else None
