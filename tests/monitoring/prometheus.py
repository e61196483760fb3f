"""A real Prometheus server (Debian's, tools/install-deps.sh test) for one test: its own config,
data dir and port on loopback, stopped and removed when the test ends, pass or fail. The
package's own service is never used or started."""

from __future__ import annotations

import json
import shutil
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.daemon import Answer, Daemon, free_port, http_ready
from tests.support.waiting import wait_for

__all__ = ["Prometheus", "binary", "free_port"]  # free_port: test_runbooks imports it here


def binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        pytest.fail("no prometheus server: tools/install-deps.sh test installs Debian's")
    return found


class Prometheus:
    """`with Prometheus(workdir, targets, rules) as prom:` scrapes `targets` every second."""

    def __init__(self, workdir: Path, targets: dict[str, str], rules: dict[str, Any]) -> None:
        self.dir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data = workdir / "data"
        (workdir / "rules.yml").write_text(yaml.safe_dump(rules))
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                       "evaluation_interval": "1s"},
            "rule_files": [str(workdir / "rules.yml")],
            "scrape_configs": [
                {"job_name": "cni-delguard",
                 "static_configs": [{"targets": [target], "labels": {"node": node}}
                                    for node, target in targets.items()]}
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = workdir / "prometheus.log"
        self.proc: Daemon | None = None

    def __enter__(self) -> Prometheus:
        self.proc = Daemon(
            "Prometheus",
            [binary(), f"--config.file={self.dir / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.data}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--storage.tsdb.retention.time=1h", "--log.level=warn"],
            self.log, ready=Answer(lambda: http_ready(f"{self.url}/-/ready"), "200 on /-/ready"))
        try:
            self.proc.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.stop()
        shutil.rmtree(self.data, ignore_errors=True)

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - loopback
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> dict[tuple[tuple[str, str], ...], float]:
        """{labels without __name__, job, instance and node: value} of an instant query."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        skip = {"__name__", "job", "instance", "node"}
        return {
            tuple(sorted((k, v) for k, v in s["metric"].items() if k not in skip)):
                float(s["value"][1])
            for s in data["result"]
        }

    def value(self, expr: str) -> float | None:
        """The one value of `expr` (None while it has none)."""
        found = self.query(expr)
        assert len(found) <= 1, (expr, found)
        return next(iter(found.values()), None)

    def wait_value(self, expr: str, expected: float, timeout: float = 60) -> None:
        wait_for(lambda: self.value(expr) == expected, f"{expr} == {expected}", timeout,
                 every=0.2, detail=lambda: f"last: {self.value(expr)}")
