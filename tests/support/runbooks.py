"""The commands the runbooks give an on-call (docs/runbooks.md, the alerts section of
docs/monitoring.md, and the alerts' annotations), sorted by what they are, and expanded as the
on-call's shell expands them once the page's variables are set: tests/installer/test_runbooks.py
runs them in the image, tests/node_roots/test_runbooks.py on a node of each layout."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.support.kustomize import render_all

REPO = Path(__file__).resolve().parents[2]
EXEC = re.compile(r"^kubectl -n (\S+) exec (\S+) -- (.+)$")
# A pod of its own on the node, for a shell there: `kubectl run` with the page's overrides.
ON_NODE = re.compile(
    r'^kubectl -n (\S+) run (\S+) --rm -i --restart=Never --image=(\S+) '
    r'--overrides="\$SHELL_ON_NODE" -- (.+)$'
)
FINDER = re.compile(r"\$\((kubectl [^)]*)\)")
ASSIGNMENT = re.compile(r"([A-Z_]+)=\S.*")


def page() -> str:
    monitoring = (REPO / "docs" / "monitoring.md").read_text()
    alerts = monitoring[monitoring.index("## Alerts and runbooks"):]
    return alerts + (REPO / "docs" / "runbooks.md").read_text()


def commands_in(markdown: str) -> list[str]:
    """The command lines of its ```sh blocks and its inline code that starts with a tool."""
    found: list[str] = []
    blocks = re.findall(r"```sh\n(.*?)```", markdown, re.S)
    for block in blocks:
        found += [line.strip() for line in block.splitlines() if line.strip()]
    prose = re.sub(r"```.*?```", "", markdown, flags=re.S)
    for raw in re.findall(r"`([^`]+)`", prose.replace("\n", " ")):
        span = " ".join(raw.split())
        if span.startswith(("kubectl ", "amtool ")):
            found.append(span)
    return found


def annotation_commands() -> list[str]:
    """The alerts' annotations' commands, with the labels the page's variables stand for."""
    (rule,) = [d for d in render_all("monitoring") if d["kind"] == "PrometheusRule"]
    found = []
    for r in rule["spec"]["groups"][0]["rules"]:
        for template in r.get("annotations", {}).values():
            text = template.replace("{{ $labels.namespace }}", "$NS")
            found += commands_in(text.replace("{{ $labels.node }}", "$NODE"))
    return found


def all_commands() -> list[str]:
    return commands_in(page()) + annotation_commands()


def kind(command: str) -> str:
    if ASSIGNMENT.fullmatch(command):
        return "assignment"
    if EXEC.match(FINDER.sub("$POD", command)):
        return "exec-prefix" if command.endswith(" --") else "exec"
    if command.endswith(" --") and EXEC.match(command + " x"):
        return "exec-prefix"
    if ON_NODE.match(command):
        return "on-node"
    if command.startswith("amtool "):
        return "amtool"
    if command.startswith("kubectl "):
        return "kubectl"
    return "unknown"


def assignments() -> dict[str, str]:
    """The page's own variables: name -> the line that sets it."""
    found = {}
    for command in commands_in(page()):
        m = ASSIGNMENT.fullmatch(command)
        if m:
            found[m[1]] = command
    return found


def expand(words: str, env: dict[str, str]) -> list[str]:
    """`words` as bash splits and expands them with `env` (the page's variables), a `$(kubectl
    ...)` pod finder standing for $POD."""
    r = subprocess.run(["bash", "-c", 'eval "set -- $1"; printf "%s\\0" "$@"', "_",
                        FINDER.sub("$POD", words)],
                       env=env, capture_output=True, text=True, timeout=30, check=True)
    return r.stdout.split("\0")[:-1]


def value_of(name: str, env: dict[str, str]) -> str:
    """What the page's assignment of `name` sets it to, with `env` set before it."""
    r = subprocess.run(["bash", "-c", 'eval "$1"; printf "%s" "${!2}"', "_", assignments()[name],
                       name], env=env, capture_output=True, text=True, timeout=30, check=True)
    return r.stdout


def shell_on_node(node: str) -> dict[str, Any]:
    """The pod the page runs for a shell on `node` (its overrides, as kubectl merges them)."""
    found: dict[str, Any] = json.loads(value_of("SHELL_ON_NODE", {"NODE": node}))
    return found
