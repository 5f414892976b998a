"""The house: one direction of dependency, no import circles, and seams that hold.

The layers, from the top down; a module may import its own layer and the layers its row
allows, never one above it::

    __main__                     ``python -m nodestep``: the command line's face
    workers, cli                 distributed runs; the command line: on the faces only
    sandbox                      the web app at /ui: on the faces and on nodestep.serve
    serve                        the Agent Server API over HTTP; builds on the faces only
    nodestep (the package face)  the public names
    agents                       messages, chat models, tools, the ReAct agent
    _declarative                 graphs declared in YAML manifests
    testing                      helpers for users' tests
    history                      provenance and diffs of stored threads (a face on _engine)
    _graph                       the public Graph: building, running, thread methods
    _engine                      runs a CompiledGraph; never sees the public Graph
    _flow, _superstep            graph definitions; the pure superstep core
    _display                     SVG drawings and HTML views, from plain data
    _conditions                  the pure ``when`` condition language
    _state, store, _memory       the state schema; the history stores; the memory store
    _errors, _ids, _numbers      errors; ids and clocks; finite numbers for settings
    _public                      the faces' helpers

``state`` is the face of the JSON helpers in ``_state``, ``tracing`` of spans and usage
(``_engine.observe``, ``_graph.usage``), ``memory`` of the memory store in ``_memory``;
``errors`` and ``conditions`` are 0.1's paths, kept for one release (see
``tests/test_public_faces.py``).

Every import counts: inside functions and under ``TYPE_CHECKING`` too, since those are
how circles hide.

The seams: a module reads no other class's private attributes (a mixin that reaches into
its host, or one object into another's state, is a split in the wrong place), imports no
private name of another module, and reaches another public package (``store``,
``agents``, ...) only through its face. Size is no rule: a module past 600 lines gets a
warning to look for a seam, and one past 1,000 fails unless the allow-list below says why
it is still one concept.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

ALLOWED: dict[str, set[str]] = {
    # python -m nodestep: runs the command line, as the console script does
    "__main__": {"cli"},
    # distributed runs: a layer of its own on the public face (an optional extra)
    "workers": {"nodestep", "_public", "_display"},
    # the command line: a layer of its own on the public faces (an optional extra)
    "cli": {"nodestep", "_public", "store", "agents", "history"},
    # the Agent Server API (an optional extra): the faces of the graph, its stores and state,
    # and of the agents it serves (the ids their nodes give messages)
    "serve": {"nodestep", "store", "state", "memory", "workers", "agents", "_public"},
    # the sandbox web app (an optional extra): on the faces and the server's face
    "sandbox": {"nodestep", "store", "state", "history", "serve", "_public"},
    "nodestep": {
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
        "_memory",
        "_errors",
        "_ids",
        "_public",
        "_display",
    },
    "agents": {"_graph", "_engine", "_flow", "_superstep", "_state", "store", "_errors", "_ids"}
    | {"_public", "_declarative", "_conditions", "_display", "_memory", "_numbers"},
    # the built-in middleware for agents, on the agents' face; and their face
    "_middleware": {"agents", "_flow", "_errors", "_display"},
    "middleware": {"_middleware", "_flow", "agents", "_public"},
    "_declarative": {"_graph", "_flow", "_state", "_conditions", "_errors", "_numbers"},
    "testing": {"_graph", "_engine", "_flow", "_superstep", "_state", "store", "_errors", "_ids"}
    | {"_public", "_display", "_memory"},
    "_graph": {"_conditions", "_engine", "_flow", "_superstep", "_state", "store", "_errors"}
    | {"_ids", "_display", "_memory", "_numbers"},
    "_engine": {"_conditions", "_flow", "_superstep", "_state", "store", "_errors", "_ids"}
    | {"_display", "_memory"},
    "_flow": {"_conditions", "_errors", "_display", "_memory", "_numbers"},
    "_display": {"_errors"},
    "_conditions": {"_errors"},
    "_superstep": {"_state", "_errors", "_display"},
    "_state": {"_errors", "_display"},
    "state": {"_state", "_public"},
    "history": {"_engine", "_public"},
    "store": {"_errors", "_public", "_display", "_numbers"},
    "tracing": {"_engine", "_graph", "_public"},
    "_memory": {"_errors", "_display", "_numbers"},
    "memory": {"_memory", "_public"},
    "_errors": set(),
    "_ids": set(),
    "_numbers": set(),
    "_public": set(),
    "errors": {"_public", "_errors"},
    "conditions": {"_public"},
}

# The packages with a public face: other packages reach them only through it.
FACED = {"agents", "cli", "store", "testing", "workers"}

WARN_AT = 600
FAIL_AT = 1000
# Modules allowed past FAIL_AT lines, each with the reason it is still one concept.
LONG_MODULES: dict[str, str] = {}

MAX_FUNCTION_LINES = 60


class LongModuleWarning(UserWarning):
    """A module past WARN_AT lines: worth a look for a seam, not a failure."""


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted((SRC / "nodestep").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


MODULES = dict(_modules())
TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "nodestep"


def _package(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _import_froms(module: str, path: Path, tree: ast.AST) -> Iterator[tuple[str, ast.ImportFrom]]:
    """Each ``from X import ...`` of the module, with X resolved to an absolute name."""
    package = _package(module, path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            yield base, node


def _imports(module: str, path: Path, tree: ast.AST | None = None) -> set[str]:
    """Every nodestep module ``module`` imports, wherever the import statement is."""
    tree = tree if tree is not None else ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    for base, node in _import_froms(module, path, tree):
        # "from nodestep import _ids" imports the module nodestep._ids; "from
        # nodestep.x import name" imports nodestep.x.
        found.update(
            f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names
        )
    return {n for n in found if n in MODULES and n != module}


GRAPH = {name: _imports(name, path, TREES[name]) for name, path in MODULES.items()}


def _private_reads(tree: ast.AST) -> list[str]:
    """Private attributes the module reads that it never defines or assigns itself.

    ``self._x`` is the module's own only if the module assigns or defines ``_x``; a read
    through anything else (``store._fd``, ``other._lock``) is the module's own only if it
    defines that attribute for its own class (``other`` is then another instance of it).
    """
    own: set[str] = set()
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute):
                    own.add(part.attr)
                elif isinstance(part, ast.Name):
                    own.add(part.id)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            own.add(node.value)  # a name in __slots__
    reads = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")):
            continue
        if node.attr.startswith("__") or node.attr in own:
            continue
        value = node.value
        if isinstance(value, ast.Call) and ast.unparse(value.func) == "super":
            continue
        reads.append(f"{ast.unparse(node)} (line {node.lineno})")
    return reads


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
def test_another_public_package_is_reached_only_through_its_face(module: str) -> None:
    layer = _layer(module)
    wrong = sorted(
        target
        for target in GRAPH[module]
        if _layer(target) in FACED
        and _layer(target) != layer
        and target != f"nodestep.{_layer(target)}"
    )
    assert wrong == [], (
        f"{module} imports {wrong}, private modules of another package: import the name "
        f"from that package's face, or move what both need below them"
    )


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_is_imported_from_another_module(module: str) -> None:
    wrong = sorted(
        f"{a.name} from {base}"
        for base, node in _import_froms(module, MODULES[module], TREES[module])
        for a in node.names
        if a.name.startswith("_")
        and not a.name.startswith("__")
        and f"{base}.{a.name}" not in MODULES  # a private module is imported, not a name
    )
    assert wrong == [], f"{module} imports the private names {wrong}; make them public there"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_reads_another_class_private_attributes(module: str) -> None:
    reads = _private_reads(TREES[module])
    assert reads == [], (
        f"{module} reads private attributes it does not define: {reads}. Give the owner a "
        f"method for what is needed, or move the code to the class that owns the attribute"
    )


def test_the_private_read_check_sees_a_mixin_and_a_reach_into_another_object() -> None:
    mixin = ast.parse("class M:\n    def f(self):\n        return self._fd\n")
    reach = ast.parse("def f(store):\n    return store._lock\n")
    own = ast.parse(
        "class C:\n"
        "    def __init__(self):\n"
        "        self._x = 1\n"
        "    def f(self, other):\n"
        "        return other._x\n"
    )
    assert _private_reads(mixin) == ["self._fd (line 3)"]
    assert _private_reads(reach) == ["store._lock (line 2)"]
    assert _private_reads(own) == []


@pytest.mark.filterwarnings("default::test_house.LongModuleWarning")
@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_long_module_is_still_one_concept(module: str) -> None:
    lines = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    if lines > FAIL_AT:
        assert module in LONG_MODULES, (
            f"{module} has {lines} lines: find the seam along which it splits into two "
            f"concepts, or add it to LONG_MODULES with the reason it is one"
        )
    elif lines > WARN_AT:
        warnings.warn(
            f"{module} has {lines} lines; is it still one concept?", LongModuleWarning, stacklevel=1
        )


def test_the_allow_list_names_only_long_modules() -> None:
    for module in LONG_MODULES:
        assert len(MODULES[module].read_text(encoding="utf-8").splitlines()) > FAIL_AT, module


@pytest.mark.parametrize("module", sorted(MODULES))
def test_functions_are_at_most_60_lines(module: str) -> None:
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})"
        for node in ast.walk(TREES[module])
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == [], f"{module}: split {long}"
