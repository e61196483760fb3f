"""The real helm of peers/pins.tsv, as the chart tests run it.

Every row of pins.tsv named `helm` is one helm the tests run against (v3 and v4 are both what
people install with today): `HELMS` is those rows, and a test takes the `helm` fixture
(tests/installer/conftest.py) to run once per row. Each run has its own config, cache and data
dirs (HELM_*_HOME) in a temp dir, so the user's ~/.config/helm and repositories are never read
or written, and nothing here needs the network or a cluster: lint, template, package, show.
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.support import peers

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "cni-delguard"
HELMS = [peer for peer in peers.all_peers() if peer.name == "helm"]
# The namespace the kustomize tree names; the chart takes the release's.
NAMESPACE = "kube-system"
RELEASE = "cni-delguard"
# The chart's defaults and the one value it has none for (image.repository): what a render
# without a values file of its own takes. `values=None` renders the bare defaults.
DEFAULTS = CHART / "ci" / "watch-values.yaml"


@dataclass(frozen=True)
class Helm:
    peer: peers.Peer
    home: Path  # HELM_CONFIG_HOME, HELM_CACHE_HOME and HELM_DATA_HOME live under it

    @property
    def version(self) -> str:
        return self.peer.version

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_")}
        for kind in ("CONFIG", "CACHE", "DATA"):
            env[f"HELM_{kind}_HOME"] = str(self.home / kind.lower())
        # No cluster is ever reached: a kubeconfig that names none, should a command try.
        env["KUBECONFIG"] = str(self.home / "no-kubeconfig")
        return env

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.peer.bin("helm")), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env(),
            check=False,
        )

    def render(
        self,
        *args: str,
        chart: Path | str = CHART,
        values: Path | None = DEFAULTS,
        namespace: str = NAMESPACE,
    ) -> list[dict]:
        """`helm template` of the chart (a directory or a packaged .tgz) with a values file
        (DEFAULTS unless given) and more arguments (--set ...): its objects, in the order helm
        prints them."""
        argv = ["template", RELEASE, str(chart), "--namespace", namespace, *args]
        if values is not None:
            argv += ["--values", str(values)]
        return [d for d in yaml.safe_load_all(_rendered(self, tuple(argv))) if d is not None]

    def refuses(
        self, *args: str, chart: Path | str = CHART, values: Path | None = DEFAULTS
    ) -> str:
        """`helm template` with ARGS (and a values file, DEFAULTS unless given) fails: its
        stderr."""
        more = ["--values", str(values)] if values is not None else []
        r = self.run("template", RELEASE, str(chart), "--namespace", NAMESPACE, *args, *more)
        assert r.returncode != 0, f"helm {self.version} rendered {args}:\n{r.stdout[:2000]}"
        return r.stderr


@functools.cache
def _rendered(helm: Helm, argv: tuple[str, ...]) -> str:
    """One `helm template` per helm and arguments in a session (the files it reads do not
    change while the tests run); each caller parses its own copy of the objects."""
    r = helm.run(*argv)
    assert r.returncode == 0, f"helm {helm.version} {' '.join(argv)}:\n{r.stderr}"
    return r.stdout


def by_kind(docs: list[dict]) -> dict[str, dict]:
    """Objects by kind (one of each in this chart and in every overlay)."""
    found = {d["kind"]: d for d in docs}
    assert len(found) == len(docs), [d["kind"] for d in docs]
    return found
