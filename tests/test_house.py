"""The house: one direction of dependency, no import circles, modules and functions of a size.

The layers, from the top down; a module may import its own layer and the layers its row
allows, never one above it::

    workers                      distributed runs; builds on the package face only
    nodestep (the package face)  the public names
    agents                       messages, chat models, tools, the ReAct agent
    declarative                  graphs declared in YAML manifests
    testing                      helpers for users' tests
    graph                        the public Graph: building, running, thread methods
    engine                       runs a CompiledGraph; never sees the public Graph
    flow, superstep              graph definitions; the pure superstep core
    conditions                   the pure ``when`` condition language
    state, store                 the state schema; the history stores
    errors, _ids                 errors; ids and clocks

Every import counts: inside functions and under ``TYPE_CHECKING`` too, since those are
how circles hide.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

ALLOWED: dict[str, set[str]] = {
    # distributed runs: a layer of its own on the public face (an optional extra)
    "workers": {"nodestep", "_public"},
    "nodestep": {
        "_public",
        "agents",
        "_declarative",
        "_conditions",
        "testing",
        "_graph",
        "_engine",
        "_flow",
        "_superstep",
        "_state",
        "store",
        "_errors",
        "_ids",
    },
    "agents": {
        "_public",
        "_graph",
        "_engine",
        "_flow",
        "_superstep",
        "_state",
        "store",
        "_errors",
        "_ids",
    },
    "_declarative": {"_graph", "_flow", "_state", "_conditions", "_errors"},
    "testing": {
        "_public",
        "_graph",
        "_engine",
        "_flow",
        "_superstep",
        "_state",
        "store",
        "_errors",
        "_ids",
    },
    "_graph": {
        "_conditions",
        "_engine",
        "_flow",
        "_superstep",
        "_state",
        "store",
        "_errors",
        "_ids",
    },
    "_engine": {"_conditions", "_flow", "_superstep", "_state", "store", "_errors", "_ids"},
    "_flow": {"_conditions", "_errors"},
    "_conditions": {"_errors"},
    "_superstep": {"_state", "_errors"},
    "_state": {"_errors"},
    # the public face of the JSON helpers
    "state": {"_state", "_public"},
    "store": {"_errors", "_public"},
    "_errors": set(),
    "_ids": set(),
    # the faces' helpers: a home for each public object, forwarding of moved names
    "_public": set(),
    # deprecated paths of 0.1, kept for one release
    "errors": {"_public"},
    "conditions": {"_public"},
}

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted((SRC / "nodestep").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


MODULES = dict(_modules())


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "nodestep"


def _imports(module: str, path: Path) -> set[str]:
    """Every nodestep module ``module`` imports, wherever the import statement is."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # "from nodestep import _ids" imports the module nodestep._ids; "from
            # nodestep.x import name" imports nodestep.x.
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names
            ]
        else:
            continue
        found.update(n for n in names if n in MODULES and n != module)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def test_the_reader_sees_imports_inside_functions_and_type_checking_blocks(tmp_path: Path) -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from nodestep._engine.loop import execute\n"
        "def f():\n"
        "    from .. import _errors\n"
        "    import nodestep._graph.graph\n"
    )
    fake = tmp_path / "m.py"
    fake.write_text(source)
    found = _imports("nodestep._state.m", fake)
    assert {"nodestep._engine.loop", "nodestep._errors", "nodestep._graph.graph"} <= found


def test_every_package_has_a_layer() -> None:
    assert {_layer(m) for m in MODULES} == set(ALLOWED)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_imports_only_its_own_layer_and_those_below(module: str) -> None:
    layer = _layer(module)
    wrong = sorted(
        target
        for target in GRAPH[module]
        if _layer(target) != layer and _layer(target) not in ALLOWED[layer]
    )
    assert wrong == [], f"{module} ({layer}) imports {wrong}, which its layer may not use"


def test_the_engine_never_imports_the_public_graph() -> None:
    engine = [m for m in MODULES if _layer(m) == "_engine"]
    assert engine
    for module in engine:
        assert not any(_layer(t) == "_graph" for t in GRAPH[module]), module


def test_no_import_circle() -> None:
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done
    path: list[str] = []

    def walk(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(GRAPH[module]):
            if state.get(target) == 1:
                circle = [*path[path.index(target) :], target]
                pytest.fail("import circle: " + " -> ".join(circle))
            if target not in state:
                walk(target)
        path.pop()
        state[module] = 2

    for module in sorted(MODULES):
        if module not in state:
            walk(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_is_at_most_400_lines(module: str) -> None:
    lines = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{module} has {lines} lines; split it by concept"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_functions_are_at_most_60_lines(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == [], f"{module}: split {long}"
