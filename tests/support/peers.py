"""The real peers of peers/pins.tsv as the tests find them: built by tools/install-peers.sh.

One row of pins.tsv is one build, cached at <cache>/<name>-<version>/bin/, with `recipe` beside
it naming the row it was built from. A test asks for a peer by name (and version when there are
several); it is skipped when the peer is not built, and fails under CI, where tools/test.sh has
run the installer first.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PINS = REPO / "peers" / "pins.tsv"
FIELDS = ("name", "version", "source", "commands", "tags", "env", "stamp")


def cache_root() -> Path:
    return Path(os.environ.get("DELGUARD_PEERS_CACHE", "/var/cache/cni-delguard/peers"))


@dataclass(frozen=True)
class Peer:
    name: str
    version: str
    source: str
    commands: tuple[str, ...]  # every binary of bin/
    tags: tuple[str, ...]
    env: tuple[str, ...]
    stamp: tuple[str, ...]  # -X linker settings, %v the version
    line: str  # the row as install-peers.sh normalizes it (fields joined by one tab)
    made: tuple[str, ...] = ()  # the commands built from C with make (NAME=make:DIR), not Go

    @property
    def go_commands(self) -> tuple[str, ...]:
        """The commands `go install tool` builds: the `tool`s of our module."""
        return tuple(c for c in self.commands if c not in self.made)

    @property
    def module(self) -> Path:
        """Our module that builds it (peers/pins.tsv says why there is one)."""
        return REPO / "peers" / f"{self.name}-{self.version}"

    @property
    def home(self) -> Path:
        return cache_root() / f"{self.name}-{self.version}"

    def recipe(self) -> str:
        """What install-peers.sh writes to <home>/recipe: the row, then its module's digests."""
        lines = [self.line]
        for name in ("go.mod", "go.sum"):
            digest = hashlib.sha256((self.module / name).read_bytes()).hexdigest()
            lines.append(f"{digest}  {name}")
        return "\n".join(lines) + "\n"

    def built(self) -> bool:
        """Whether the cache holds this very row's build."""
        try:
            return (self.home / "recipe").read_text(encoding="utf-8") == self.recipe()
        except OSError:
            return False

    def bin(self, command: str) -> Path:
        if command not in self.commands:
            raise KeyError(f"{self.name} {self.version} has no command {command!r}")
        return self.home / "bin" / command


def _split(field: str) -> tuple[str, ...]:
    return () if field == "-" else tuple(field.split(","))


def parse(text: str) -> list[Peer]:
    peers = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        fields = raw.split()
        if len(fields) != len(FIELDS):
            raise ValueError(f"pins.tsv line {number}: {len(fields)} fields, not {len(FIELDS)}")
        name, version, source, commands, tags, env, stamp = fields
        listed = _split(commands)
        names = tuple(c.split("=", 1)[0] for c in listed)
        made = tuple(c.split("=", 1)[0] for c in listed if "=make:" in c)
        peers.append(Peer(name, version, source, names, _split(tags), _split(env),
                          _split(stamp), "\t".join(fields), made))
    return peers


def all_peers() -> list[Peer]:
    return parse(PINS.read_text(encoding="utf-8"))


def find(name: str, version: str | None = None) -> Peer:
    rows = [p for p in all_peers() if p.name == name and version in (None, p.version)]
    if len(rows) != 1:
        raise LookupError(f"pins.tsv has {len(rows)} rows for {name} {version or ''}".rstrip())
    return rows[0]


def built_or_skip(name: str, version: str | None = None) -> Peer:
    """The peer, built; skipped when it is not (a failure under CI, which builds every peer)."""
    from tests.support.skips import skip_or_fail

    peer = find(name, version)
    if not peer.built():
        skip_or_fail(f"{peer.name} {peer.version} is not built: run tools/install-peers.sh "
                     f"{peer.name}")
    return peer
