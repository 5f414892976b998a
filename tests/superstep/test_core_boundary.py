"""The pure core (superstep algebra and state) imports no event loop, thread, store or runner.

The check reads each module's source, so it also sees imports that only run inside a
function, and follows nodestep imports transitively from the two core packages.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import nodestep._state
import nodestep._superstep

CORE_PACKAGES = (nodestep._state, nodestep._superstep)

FORBIDDEN = (
    "asyncio",
    "anyio",
    "trio",
    "threading",
    "concurrent",
    "multiprocessing",
    "subprocess",
    "socket",
    "pathlib",
    "shutil",
    "tempfile",
    "portalocker",
    "nodestep.store",
    "nodestep._engine",
    "nodestep._graph",
    "nodestep._flow",
)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(source: str, module: str = "m", is_package: bool = False) -> set[str]:
    """Return every module ``source`` imports (``from a import b`` gives ``a`` and ``a.b``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


def _is_forbidden(name: str) -> bool:
    return any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN)


def _core_modules() -> list[str]:
    names = []
    for package in CORE_PACKAGES:
        names.append(package.__name__)
        names.extend(
            info.name for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
        )
    return names


def _source(name: str) -> tuple[str, bool]:
    module = importlib.import_module(name)
    path = Path(module.__file__ or "")
    return path.read_text(encoding="utf-8"), path.name == "__init__.py"


def _closure() -> dict[str, set[str]]:
    """Return the imports of every nodestep module the core reaches, by module."""
    todo = _core_modules()
    seen: dict[str, set[str]] = {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        source, is_package = _source(name)
        found = imports_of(source, name, is_package)
        seen[name] = found
        for dep in found:
            if dep.startswith("nodestep") and not _is_forbidden(dep):
                try:
                    importlib.import_module(dep)
                except ImportError:
                    continue  # "from nodestep.x import name": the module is nodestep.x
                if dep not in seen:
                    todo.append(dep)
    return seen


def test_the_checker_sees_imports_of_every_form():
    source = (
        "import asyncio\n"
        "from nodestep.store import base\n"
        "def f():\n"
        "    import threading\n"
        "    from .. import _engine\n"
    )
    found = imports_of(source, "nodestep._state.x")
    assert {"asyncio", "nodestep.store.base", "threading", "nodestep._engine"} <= found
    assert all(
        _is_forbidden(n)
        for n in ["asyncio", "nodestep.store.base", "threading", "nodestep._engine"]
    )
    assert not _is_forbidden("nodestep._state.json")
    assert not _is_forbidden("asynciox")


def test_the_core_covers_both_packages_and_the_errors_module():
    modules = _closure()
    assert "nodestep._superstep.merge" in modules
    assert "nodestep._superstep.plan" in modules
    assert "nodestep._state.view" in modules
    assert "nodestep._errors" in modules


@pytest.mark.parametrize("module", sorted(_closure()))
def test_core_module_imports_no_event_loop_thread_store_or_runner(module):
    bad = sorted(name for name in _closure()[module] if _is_forbidden(name))
    assert bad == [], f"{module} imports {bad}"
