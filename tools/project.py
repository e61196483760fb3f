#!/usr/bin/env python3
"""project.py: the project's public home (packaging/project.env), read and checked.

    python3 tools/project.py                 print every key, `KEY=VALUE` (empty when unset)
    python3 tools/project.py --get KEY       print one (repository, image, runbooks); exit 3
                                             when it is unset, saying where to set it

`runbooks` is derived: where the alerts' runbook links point for this version of the project
(REPOSITORY/blob/vVERSION/docs/runbooks.md), or the repository-relative docs/runbooks.md.
Only the tools read this (generate-chart.py, the release tool); the product never does.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cni_delguard import __version__  # noqa: E402 (the repository's own package, by path)

FILE = REPO / "packaging" / "project.env"
KEYS = {"repository": "CNI_DELGUARD_REPOSITORY", "image": "CNI_DELGUARD_IMAGE"}
RELATIVE_RUNBOOKS = "docs/runbooks.md"
_URL = re.compile(r"https://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~-]+)+")
# REGISTRY/PATH as OCI names a repository: no tag, no digest (a release adds its own).
_IMAGE = re.compile(r"[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+")


class ProjectError(Exception):
    pass


@dataclass(frozen=True)
class Home:
    repository: str = ""
    image: str = ""

    def runbooks(self, version: str) -> str:
        if not self.repository:
            return RELATIVE_RUNBOOKS
        return f"{self.repository}/blob/v{version}/{RELATIVE_RUNBOOKS}"


def parse(text: str) -> Home:
    """The file's keys; ProjectError for an unknown key or a value of the wrong shape."""
    found: dict[str, str] = {}
    names = {v: k for k, v in KEYS.items()}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, eq, value = line.partition("=")
        if not eq or key not in names:
            raise ProjectError(f"project.env line {n}: not one of {', '.join(KEYS.values())}=")
        found[names[key]] = value
    home = Home(**found)
    if home.repository and not _URL.fullmatch(home.repository):
        raise ProjectError(f"{KEYS['repository']}: not an https URL without a trailing slash")
    if home.image and not _IMAGE.fullmatch(home.image):
        raise ProjectError(f"{KEYS['image']}: not REGISTRY/PATH (no tag, no digest)")
    return home


def load(path: Path = FILE) -> Home:
    return parse(path.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--get", choices=(*KEYS, "runbooks"), help="print this one")
    args = parser.parse_args(argv)
    try:
        home = load()
    except ProjectError as exc:
        sys.stderr.write(f"project: {exc}\n")
        return 2
    values = {**{k: getattr(home, k) for k in KEYS}, "runbooks": home.runbooks(__version__)}
    if args.get is None:
        sys.stdout.writelines(f"{k}={v}\n" for k, v in values.items())
        return 0
    if not values[args.get]:
        sys.stderr.write(f"project: {args.get} is unset: set {KEYS[args.get]} in {FILE}\n")
        return 3
    sys.stdout.write(values[args.get] + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
