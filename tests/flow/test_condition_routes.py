"""Condition strings in when(): chains, drawing, specs, and what when() refuses."""

from __future__ import annotations

import pytest

from nodestep import END, START, BaseState, Condition, Graph, node, when
from nodestep._flow.routing import When


class Count(BaseState):
    n: int = 0
    label: str = ""


@node
def step(state: Count) -> dict[str, int]:
    return {"n": state.n + 1}


@node
def big(state: Count) -> dict[str, str]:
    return {"label": "big"}


@node
def small(state: Count) -> dict[str, str]:
    return {"label": "small"}


def chain() -> When:
    return when("n > 5", big, otherwise=when("n > 2", small, otherwise=END))


def test_a_chain_takes_the_first_target_whose_condition_holds() -> None:
    graph = Graph(Count).flow(START >> step, step >> chain(), big >> END, small >> END)
    assert graph.invoke({"n": 9}).state.label == "big"
    assert graph.invoke({"n": 3}).state.label == "small"
    assert graph.invoke({"n": 0}).state.label == ""


def test_a_chain_lists_every_target_and_its_fallback() -> None:
    route = chain()
    assert route.targets() == [big, small, END]
    assert route.fallback() is END
    assert [link.target for link in route.links()] == [big, small]


def test_the_drawing_labels_condition_edges_with_their_text() -> None:
    graph = Graph(Count).flow(START >> step, step >> chain(), big >> END, small >> END)
    drawing = graph.to_mermaid()
    assert 'step -- "n #gt; 5" --> big' in drawing
    assert 'step -- "n #gt; 2" --> small' in drawing
    assert 'step -- "otherwise" --> END' in drawing


def test_the_spec_writes_conditions_as_text_and_chains_nested() -> None:
    graph = Graph(Count).flow(START >> step, step >> chain(), big >> END, small >> END)
    edge = next(e for e in graph.to_spec()["edges"] if e["from"] == "step")
    assert edge["when"] == {
        "condition": "n > 5",
        "then": "big",
        "otherwise": {"condition": "n > 2", "then": "small", "otherwise": "END"},
    }


def test_one_condition_object_can_route_two_graphs_over_different_states() -> None:
    class Other(BaseState):
        n: str = ""

    @node
    def other(state: Other) -> None:
        return None

    shared = Condition("n > 5")
    Graph(Count).flow(START >> step, step >> when(shared, big, otherwise=END), big >> END)
    with pytest.raises(ValueError, match="orders two numbers or two strings"):
        Graph(Other).flow(START >> other, other >> when(shared, END, otherwise=END))


def test_context_or_functions_with_a_python_predicate_are_refused() -> None:
    with pytest.raises(TypeError, match="context= and functions= are for condition strings"):
        when(lambda s: True, big, otherwise=END, functions={"f": print})
