"""peers/pins.tsv: every row parses, has its module, and the module pins exactly that version."""

from __future__ import annotations

import re

import pytest

from tests.support import peers


def _requires(go_mod: str) -> dict[str, str]:
    found = dict(re.findall(r"^\s*(?:require\s+)?([\w./-]+)\s+(v[\w.+-]+)", go_mod, re.M))
    return {module: version for module, version in found.items() if module != "go"}


def command_of(tool: str) -> str:
    """The binary `go install` makes of a package: its last path element, or the one before a
    major version suffix (etcd's server is the module go.etcd.io/etcd/server/v3: bin/server)."""
    parts = tool.split("/")
    if re.fullmatch(r"v[2-9][0-9]*", parts[-1]):
        return parts[-2]
    return parts[-1]


@pytest.mark.parametrize("peer", peers.all_peers(), ids=lambda p: f"{p.name}-{p.version}")
def test_row_has_its_module_at_its_version(peer: peers.Peer) -> None:
    go_mod = (peer.module / "go.mod").read_text(encoding="utf-8")
    assert _requires(go_mod).get(peer.source) == peer.version, go_mod[:400]
    tools = set(re.findall(r"^\s*(?:tool\s+)?(" + re.escape(peer.source) + r"(?:/[\w./-]+)?)\s*$",
                           go_mod, re.M))
    assert {command_of(t) for t in tools} == set(peer.go_commands), tools
    assert (peer.module / "go.sum").is_file()


def test_names_and_versions_are_unique() -> None:
    keys = [(p.name, p.version) for p in peers.all_peers()]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize(
    ("text", "error"),
    [
        pytest.param("a v1 m x - - -\n", None, id="one-row"),
        pytest.param("# c\n\n  a v1 m x,y t1,t2 K=V p.V=%v\n", None, id="comments-lists"),
        pytest.param("a v1 m x - -\n", "6 fields", id="short-row"),
        pytest.param("a v1 m x,c=make:src - - -\n", None, id="a-command-made-from-c"),
    ],
)
def test_parse(text: str, error: str | None) -> None:
    if error:
        with pytest.raises(ValueError, match=error):
            peers.parse(text)
        return
    (row,) = peers.parse(text)
    assert row.line == "\t".join(text.split("\n")[-2].split())
    assert row.commands == tuple(c.split("=")[0] for c in text.split()[-4].split(","))
    assert set(row.go_commands) | set(row.made) == set(row.commands)
