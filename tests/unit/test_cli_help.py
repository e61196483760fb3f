"""Every option of every command says what it is for (`--help`), and each command offers only
the options that make sense for it: the argparse tree of cni_delguard.cli, walked."""

from __future__ import annotations

import argparse
import io
from collections.abc import Iterator

from cni_delguard import cli


def parser() -> argparse.ArgumentParser:
    return cli.build_parser(io.StringIO(), io.StringIO())


def commands(top: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield "cni-delguard", top
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def options(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if a.option_strings
            and not isinstance(a, argparse._HelpAction)]


def walk() -> list[tuple[str, str, argparse.Action]]:
    return [(name, a.option_strings[-1], a) for name, p in commands(parser()) for a in options(p)]


def test_every_option_of_every_command_has_help() -> None:
    missing = [f"{name} {flag}" for name, flag, a in walk()
               if not a.help or a.help == argparse.SUPPRESS or not a.help.strip()]
    assert missing == []


def test_the_walk_finds_every_command_and_an_option_without_help() -> None:
    """The check above can fail: an option added without help is found by the walk."""
    top = parser()
    names = [name for name, _ in commands(top)]
    assert {"install", "uninstall", "ready", "live", "doctor", "assess", "release", "stats",
            "list", "version"} <= set(names)
    sub = dict(commands(top))["ready"]
    sub.add_argument("--undocumented")
    assert any(a.help is None for a in options(sub))


# A probe runs on every period of the kubelet: what it may be given is where to look and whether
# "ready" means installed or uninstalled, never what would change or slow the node.
READY = {"--root", "--layout", "--conf-dir", "--bin-dir", "--conf-file", "--state-dir",
         "--uninstalled"}


def test_ready_offers_only_what_a_probe_needs() -> None:
    ready = dict(commands(parser()))["ready"]
    flags = {f for a in options(ready) for f in a.option_strings if f.startswith("--")}
    assert flags == READY


def test_release_reason_says_what_it_records() -> None:
    release = dict(commands(parser()))["release"]
    (reason,) = [a for a in options(release) if "--reason" in a.option_strings]
    assert "recorded" in reason.help and "log" in reason.help, reason.help
