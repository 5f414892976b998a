"""``middleware:`` in a Graph document: middleware named by import path, each made
without arguments (a class) or used as it is (an instance); and ``to_yaml`` writes it back."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodestep import GraphConfigError, load_graph

pytest.importorskip("yaml")

HOOKS = """
from nodestep import BaseState, Middleware

SEEN: list[str] = []


class Doc(BaseState):
    n: int = 0


def bump(state: Doc) -> dict:
    return {"n": state.n + 1}


class Audit(Middleware):
    def before_node(self, ctx):
        SEEN.append(f"audit {ctx.node_name}")


class Limits(Middleware):
    def __init__(self, most: int = 3) -> None:
        self.most = most

    def before_node(self, ctx):
        SEEN.append(f"limits {self.most}")


class Needy(Middleware):
    def __init__(self, key: str) -> None:
        self.key = key


strict = Limits(most=1)


class NotMiddleware:
    pass
"""

GRAPH = """
nodestep: 1
kind: Graph
name: doc
state: m_hooks:Doc
start: bump
middleware: {middleware}
nodes:
  - name: bump
    function: m_hooks:bump
    edges: [{{target: END}}]
"""


@pytest.fixture
def hooks(tmp_path: Path) -> Iterator[object]:
    (tmp_path / "m_hooks.py").write_text(textwrap.dedent(HOOKS), encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    import m_hooks

    yield m_hooks
    sys.path.remove(str(tmp_path))
    sys.modules.pop("m_hooks", None)


def _manifest(tmp_path: Path, middleware: str) -> Path:
    path = tmp_path / "graph.yaml"
    path.write_text(GRAPH.format(middleware=middleware), encoding="utf-8")
    return path


def test_middleware_named_in_the_manifest_runs_in_list_order(hooks, tmp_path: Path) -> None:
    graph = load_graph(_manifest(tmp_path, "[m_hooks:Audit, m_hooks:strict]"))
    assert graph.invoke({}).state.n == 1
    assert hooks.SEEN == ["audit bump", "limits 1"]
    assert [type(m).__name__ for m in graph.middleware] == ["Audit", "Limits"]


def test_the_callers_middleware_comes_after_the_manifests(hooks, tmp_path: Path) -> None:
    graph = load_graph(_manifest(tmp_path, "[m_hooks:Audit]"), middleware=[hooks.Limits()])
    graph.invoke({})
    assert hooks.SEEN == ["audit bump", "limits 3"]


@pytest.mark.parametrize(
    ("written", "problem"),
    [
        ("m_hooks:Audit", r"graph\.yaml:7:\d+: middleware takes a list of import paths"),
        (
            "[m_hooks:Nope]",
            r"graph\.yaml:7:\d+: middleware 'm_hooks:Nope': 'm_hooks' has no 'Nope'",
        ),
        ("[m_hooks:NotMiddleware]", r"'m_hooks:NotMiddleware' is not a Middleware subclass"),
        ("[m_hooks:Needy]", r"'m_hooks:Needy' cannot be made without arguments \(TypeError"),
        ("[m_hooks:bump]", r"'m_hooks:bump' is not a Middleware subclass or instance"),
    ],
)
def test_a_bad_middleware_entry_is_a_problem_at_its_line(
    hooks, tmp_path: Path, written: str, problem: str
) -> None:
    with pytest.raises(GraphConfigError, match=problem):
        load_graph(_manifest(tmp_path, written))


def test_middleware_outside_the_allowed_packages_is_refused(hooks, tmp_path: Path) -> None:
    with pytest.raises(GraphConfigError, match=r"outside the allowed packages"):
        load_graph(_manifest(tmp_path, "[m_hooks:Audit]"), allowed_packages=["app"])


def test_to_yaml_writes_middleware_a_manifest_can_make_and_refuses_the_rest(
    hooks, tmp_path: Path
) -> None:
    graph = load_graph(_manifest(tmp_path, "[m_hooks:Audit, m_hooks:Limits]"))
    text = graph.to_yaml()
    assert "middleware:\n- m_hooks:Audit\n- m_hooks:Limits\n" in text
    again = tmp_path / "again.yaml"
    again.write_text(text, encoding="utf-8")
    assert [type(m).__name__ for m in load_graph(again).middleware] == ["Audit", "Limits"]
    configured = load_graph(_manifest(tmp_path, "[m_hooks:strict]"))
    with pytest.raises(GraphConfigError, match=r"Middleware 'Limits' holds settings"):
        configured.to_yaml()
    needy = load_graph(_manifest(tmp_path, "[]"), middleware=[hooks.Needy("k")])
    with pytest.raises(GraphConfigError, match=r"'Needy' cannot be made without arguments"):
        needy.to_yaml()
