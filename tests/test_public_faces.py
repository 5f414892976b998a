"""The public surface: a few faces re-export it, and nothing else is importable by a public path.

The faces are the modules users import from. Each one's ``__all__`` is exactly its public
attributes, every public class and function names its face as ``__module__`` (its home),
and every other module lives under a private path (a part that starts with ``_``), except
the 0.1 paths kept for one release, which resolve their names with a ``DeprecationWarning``.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import re
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest

import nodestep

FACES = (
    "nodestep",
    "nodestep.agents",
    "nodestep.cli",
    "nodestep.history",
    "nodestep.memory",
    "nodestep.middleware",
    "nodestep.sandbox",
    "nodestep.serve",
    "nodestep.state",
    "nodestep.store",
    "nodestep.testing",
    "nodestep.tracing",
    "nodestep.workers",
)

# 0.1 paths kept for one release, and a name each still resolves, with its new home.
DEPRECATED = {
    "nodestep.errors": ("StateStoreError", "nodestep"),
    "nodestep.conditions": ("Condition", "nodestep"),
    "nodestep.testing.conformance": ("event", "nodestep.testing"),
    "nodestep.store.filesystem": ("FilesystemStateStore", "nodestep.store"),
    "nodestep.store.postgres": ("PostgresStateStore", "nodestep.store"),
}

ROOT = Path(__file__).resolve().parents[1]


def _face(name: str) -> types.ModuleType:
    return importlib.import_module(name)


def _public_objects() -> list[tuple[str, str, object]]:
    return [
        (face, name, getattr(_face(face), name)) for face in FACES for name in _face(face).__all__
    ]


def _every_module() -> list[str]:
    found = ["nodestep"]
    for info in pkgutil.walk_packages(nodestep.__path__, "nodestep."):
        found.append(info.name)
    return found


@pytest.mark.parametrize(("face", "name", "obj"), _public_objects())
def test_every_public_name_imports_from_its_face_and_has_a_docstring(
    face: str, name: str, obj: object
) -> None:
    namespace: dict[str, object] = {}
    exec(f"from {face} import {name}", namespace)
    assert namespace[name] is obj
    if inspect.isclass(obj) or inspect.isfunction(obj):  # constants and aliases: the docs
        doc = inspect.getdoc(obj)
        assert doc and doc.strip(), f"{face}.{name} has no docstring"


@pytest.mark.parametrize("face", FACES)
def test_a_star_import_gives_every_public_name_and_no_other(face: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from {face} import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(_face(face).__all__)


@pytest.mark.parametrize("face", FACES)
def test_an_unknown_name_of_a_face_is_an_attribute_error_naming_it(face: str) -> None:
    with pytest.raises(
        AttributeError, match=rf"module '{re.escape(face)}' has no attribute 'Nope'"
    ):
        _face(face).Nope  # noqa: B018


def test_the_package_has_a_version_and_a_docstring() -> None:
    assert isinstance(nodestep.__version__, str)
    assert nodestep.__doc__


def test_every_public_error_derives_from_nodestep_error() -> None:
    for face, name, obj in _public_objects():
        if isinstance(obj, type) and issubclass(obj, BaseException) and name != "GraphInterrupt":
            assert issubclass(obj, nodestep.NodestepError), f"{face}.{name}"


@pytest.mark.parametrize("face", FACES)
def test_a_faces_all_is_exactly_its_public_attributes(face: str) -> None:
    module = _face(face)
    # dir() names the lazy ones too (StateStoreConformance is imported on first use).
    public = {
        name
        for name in dir(module)
        if not name.startswith("_") and not isinstance(getattr(module, name), types.ModuleType)
    }
    assert public == set(module.__all__)
    assert len(module.__all__) == len(set(module.__all__))


@pytest.mark.parametrize(("face", "name", "obj"), _public_objects())
def test_every_public_class_and_function_names_its_face_as_its_home(
    face: str, name: str, obj: object
) -> None:
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        return
    home = obj.__module__
    assert home in FACES, f"{face}.{name} says it lives in {home}, which is no face"
    assert getattr(_face(home), name) is obj
    assert name in _face(home).__all__


def test_nothing_public_lives_under_a_private_path() -> None:
    public = {
        module
        for module in _every_module()
        if not any(part.startswith("_") for part in module.split("."))
    }
    assert public == set(FACES) | set(DEPRECATED)


def test_the_top_level_stays_small() -> None:
    # A name goes on its package's face (nodestep.agents, nodestep.store, ...) unless a first
    # graph or agent needs it; the top level had 106 names in 0.1 and keeps about 75.
    # 84: the sub-agent contract put AgentTask, AgentResult and AgentGroupError there,
    # Middleware is passed to Graph, and every error is on the top level (WorkspaceError).
    assert len(nodestep.__all__) <= 84


@pytest.mark.parametrize(("old", "moved"), sorted(DEPRECATED.items()))
def test_a_deprecated_path_resolves_with_a_warning_naming_the_new_import(
    old: str, moved: tuple[str, str]
) -> None:
    name, home = moved
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"'from {re.escape(home)} import {name}'"):
        obj = getattr(module, name)
    assert obj is getattr(_face(home), name)


@pytest.mark.parametrize("name", sorted(nodestep._MOVED))
def test_a_name_that_left_the_top_level_resolves_there_with_a_warning(name: str) -> None:
    home = nodestep._MOVED[name]
    with pytest.warns(DeprecationWarning, match=rf"'from {re.escape(home)} import {name}'"):
        obj = getattr(nodestep, name)
    assert obj is getattr(_face(home), name)
    assert name not in nodestep.__all__


def test_an_unknown_name_of_a_deprecated_path_is_an_attribute_error() -> None:
    errors = importlib.import_module("nodestep.errors")
    with pytest.raises(AttributeError, match=r"'nodestep\.errors' has no attribute 'Nope'"):
        errors.Nope  # noqa: B018


@pytest.mark.parametrize(("face", "name", "obj"), _public_objects())
def test_type_hints_of_public_classes_resolve_from_their_home(
    face: str, name: str, obj: object
) -> None:
    # Their home holds no Any or Literal: the annotations were resolved where they were written.
    if inspect.isclass(obj):
        typing.get_type_hints(obj)


def test_a_users_state_may_hold_public_types_as_fields() -> None:
    from pydantic import Field

    from nodestep import BaseState, HistoryEvent, Interrupt
    from nodestep.agents import ToolCall

    class Kept(BaseState):
        interrupt: Interrupt | None = None
        event: HistoryEvent | None = None
        calls: list[ToolCall] = Field(default_factory=list)

    kept = Kept(calls=[ToolCall(id="c1", name="look", args={})])
    assert Kept.model_validate(kept.model_dump()).calls == kept.calls


def test_public_objects_pickle_by_their_public_path() -> None:
    from nodestep import GraphConfigError, RetryPolicy, node

    policy = RetryPolicy(attempts=3)
    assert b"nodestep._" not in pickle.dumps(policy)
    assert pickle.loads(pickle.dumps(policy)) == policy
    assert pickle.loads(pickle.dumps(node)) is node
    error = pickle.loads(pickle.dumps(GraphConfigError("bad")))
    assert type(error) is GraphConfigError


def test_every_public_name_of_every_face_appears_on_a_docs_page() -> None:
    text = "\n".join(page.read_text() for page in (ROOT / "docs").glob("*.md"))
    missing = [
        f"{face}.{name}"
        for face in FACES
        for name in _face(face).__all__
        if not re.search(rf"\b{re.escape(name)}\b", text)
    ]
    assert missing == []


@pytest.mark.slow
def test_importing_every_face_warns_nothing() -> None:
    code = "; ".join(f"import {face}" for face in FACES)
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_the_old_postgres_schema_command_still_runs_and_says_the_new_one() -> None:
    old = [sys.executable, "-m", "nodestep.store.postgres", "--print", "--schema", "app"]
    new = [sys.executable, "-m", "nodestep.store", "postgres-schema", "--print", "--schema", "app"]
    before = subprocess.run(old, capture_output=True, text=True, check=False)
    after = subprocess.run(new, capture_output=True, text=True, check=False)
    assert before.returncode == after.returncode == 0
    assert before.stdout == after.stdout
    assert 'CREATE SCHEMA IF NOT EXISTS "app"' in before.stdout
    assert "python -m nodestep.store postgres-schema" in before.stderr
    assert after.stderr == ""
