"""The floor plan of the package (docs/DESIGN.md) stays true: a module imports only from floors
below its own, or from its own subpackage. Read from the source with ast, so an import inside a
function or under TYPE_CHECKING counts like any other.

    >>> violations("cni_delguard.state.store", "from cni_delguard.commands import add")
    ['cni_delguard.state.store (state, floor 1) imports cni_delguard.commands (floor 3)']
    >>> violations("cni_delguard.commands.add", "from cni_delguard.state import store")
    []
"""

from __future__ import annotations

import ast
import doctest
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "cni_delguard"

# Lowest first. Two subpackages on one floor do not import each other either.
FLOORS = {
    "cni_delguard": 0,  # __init__: the version and the spec versions, nothing else
    "tooling": 0,  # the operator commands' argparse base; imports nothing of ours
    "buildinfo": 0,  # what this program was built as (version, arch); imports only __init__
    "cni": 0,  # the CNI protocol: errors, environment and identifiers, JSON
    "state": 1,  # the guard's files on disk: primitives, markers, locks
    "invoke": 1,  # the delegate's process: find, spawn, watch, reap
    "guard": 2,  # config, evidence, the pure DEL decision, the decision log
    "commands": 3,  # ADD, DEL, CHECK, GC, STATUS, VERSION and their dispatch table
    "host": 3,  # the node's filesystem through --root: paths, reads, programs, layouts, dirs
    "node": 4,  # install / uninstall / watch: the bundle and the conf on a node
    "ops": 5,  # the operator's tools that read what the guard and the installer left
    "monitoring": 6,  # the series, their values, the watcher's exporter and its endpoint
    "watcher": 7,  # `install --watch`: the watch loop, assess's summary and the metrics, together
    "cli": 8,  # the process boundary
    "__main__": 9,  # `python -m cni_delguard`: runs cli
}
# The decision core is pure: it may read the marker vocabulary and nothing else of ours.
PURE = {"cni_delguard.guard.decide": {"cni_delguard.state.marker"}}


def floor_of(module: str) -> tuple[str, int]:
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else parts[0]
    return name, FLOORS[name]


def imported(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m == "cni_delguard" or m.startswith("cni_delguard.")}


def violations(module: str, source: str) -> list[str]:
    name, floor = floor_of(module)
    bad = []
    for target in sorted(imported(source)):
        if module in PURE and target not in PURE[module]:
            bad.append(f"{module} is pure but imports {target}")
            continue
        target_name, target_floor = floor_of(target)
        if target_name in (name, "cni_delguard"):
            continue
        if target_floor >= floor:
            bad.append(f"{module} ({name}, floor {floor}) imports {target} (floor {target_floor})")
    return bad


def modules() -> list[tuple[str, pathlib.Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        found.append((".".join(parts), path))
    return found


@pytest.mark.parametrize(("module", "path"), modules(), ids=[m for m, _ in modules()])
def test_no_module_imports_a_floor_above_its_own(module, path):
    assert violations(module, path.read_text()) == []


def test_every_module_is_on_a_floor():
    unplaced = {m for m, _ in modules() if floor_of(m)[0] not in FLOORS}
    assert unplaced == set()


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        pytest.param(
            "cni_delguard.state.store",
            "def f():\n    from cni_delguard.guard import config\n",
            1,
            id="lazy-import-upwards",
        ),
        pytest.param(
            "cni_delguard.state.store",
            "if TYPE_CHECKING:\n    from cni_delguard.invoke.delegate import run\n",
            1,
            id="sibling-on-the-same-floor",
        ),
        pytest.param(
            "cni_delguard.guard.decide", "from cni_delguard.state import store\n", 1, id="impure"
        ),
        pytest.param("cni_delguard.guard.decide", "import os\n", 0, id="stdlib-is-fine"),
        pytest.param("cni_delguard.cli", "from cni_delguard.ops import stats\n", 0, id="down"),
        pytest.param(
            "cni_delguard.node.cli",
            "from cni_delguard.monitoring import exporter\n",
            1,
            id="the-watcher-below-its-metrics",
        ),
        pytest.param(
            "cni_delguard.ops.stats",
            "def f():\n    from cni_delguard.monitoring import metrics\n",
            1,
            id="stats-below-its-textfile",
        ),
    ],
)
def test_the_checker_catches_what_it_should(module, source, expected):
    assert len(violations(module, source)) == expected


# None left: the last, ops/metrics.py <-> ops/stats.py, went when the metrics moved to their own
# floor (monitoring/, connected to `stats --prometheus` by cli.py). Any circle is new, and a
# test failure.
KNOWN_CIRCLES: set[frozenset[str]] = set()


def import_graph() -> dict[str, set[str]]:
    """module -> the modules of ours it imports (lazy and TYPE_CHECKING imports included);
    `from cni_delguard.ops import stats` is an edge to cni_delguard.ops.stats."""
    names = {m for m, _ in modules()}
    graph: dict[str, set[str]] = {}
    for module, path in modules():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    edges.add(sub if sub in names else node.module)
            elif isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names)
        graph[module] = {e for e in edges if e in names and e != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = set()
            while True:
                w = stack.pop()
                part.add(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(part)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_inside_the_package():
    new = [c for c in circles(import_graph()) if frozenset(c) not in KNOWN_CIRCLES]
    assert new == []


def test_the_circle_finder_finds_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [{"a", "b", "c"}]


def test_docstring_examples():
    import sys

    result = doctest.testmod(sys.modules[__name__])
    assert result.failed == 0 and result.attempted == 6


# The node's `--root` is reached through the host floor only (cni_delguard/host/root.py's
# NodeRoot): a module elsewhere that joins a root with a path itself is a second place for the
# rules (normalise first, never leave the root) to be got wrong.
ROOT_NAMES = {"root", "node_root"}


def _is_root(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ROOT_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in ROOT_NAMES
    return False


def root_joins(source: str) -> list[int]:
    """The lines that join a root with a path without the host floor: os.path.join(root, ...),
    os.path.relpath(..., root), f"{root}/...", root + "/...".

    >>> root_joins('import os\\nos.path.join(args.root, "etc")\\n')
    [2]
    >>> root_joins('x = f"{root}/proc/{pid}"\\ny = f"{name}/x"\\n')
    [1]
    >>> root_joins('p = opts.root + "/etc"\\n')
    [1]
    >>> root_joins('NodeRoot(args.root).here("/etc")\\n')
    []
    """
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if (func.attr in ("join", "relpath") and isinstance(func.value, ast.Attribute)
                    and func.value.attr == "path" and any(_is_root(a) for a in node.args)):
                lines.append(node.lineno)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _is_root(node.left):
            lines.append(node.lineno)
        elif isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if isinstance(first, ast.FormattedValue) and _is_root(first.value):
                lines.append(node.lineno)
    return sorted(lines)


@pytest.mark.parametrize(("module", "path"), modules(), ids=[m for m, _ in modules()])
def test_no_module_joins_the_root_but_the_host_floor(module, path):
    if floor_of(module)[0] == "host":
        return
    assert root_joins(path.read_text()) == []
