"""A ``branch()`` or ``when()`` written the LangGraph way (a list of names as the mapping,
a node's name as a target), or a ``Command(goto=...)`` that is no target nor a list of
them, is a ``TypeError`` that shows the value given and the fix; and the fix a flow
problem suggests is itself a valid flow."""

from __future__ import annotations

from typing import Any

import pytest

from nodestep import END, START, BaseState, Command, Graph, GraphConfigError, branch, node, when


@node
def b(state: Any) -> None:
    return None


def route(state: Any) -> str:
    return "b"


@pytest.mark.parametrize(
    ("mapping", "expected"),
    [
        (["b", "c"], "got ['b', 'c']. Map each key the router returns to its target, e.g. "),
        (["b", "c"], "(a LangGraph list ['b', 'c'] is {'b': b, 'c': c} here)."),
        ({}, "got {}. Map each key the router returns to its target, e.g. {'refund': refund"),
        ("b", "got 'b'. Map each key"),
    ],
)
def test_a_mapping_that_is_not_a_dict_is_shown_with_the_fix(mapping: Any, expected: str) -> None:
    with pytest.raises(TypeError) as caught:
        branch(route, mapping)
    assert expected in str(caught.value)


def test_a_target_named_by_text_says_to_give_the_node_itself() -> None:
    with pytest.raises(TypeError) as caught:
        branch(route, {"b": "b"})
    assert str(caught.value) == (
        "branch() targets must be nodes or END, got 'b'. A target is the node itself (the "
        "function decorated with @node), not its name: write the node named 'b' without quotes."
    )


@pytest.mark.parametrize("text", ["END", "__end__"])
def test_end_named_by_text_says_to_use_end(text: str) -> None:
    with pytest.raises(TypeError, match="Use END itself \\(from nodestep import END\\)"):
        when(route, b, otherwise=text)  # type: ignore[arg-type]
    assert branch(route, {"b": b, "done": END}).targets() == [b, END]


@pytest.mark.parametrize("goto", [5, 2.5, b"b", {"b": 1}, bytearray(b"b")])
def test_a_goto_that_is_no_target_nor_a_list_of_them_is_refused(goto: Any) -> None:
    with pytest.raises(TypeError) as caught:
        Command(goto=goto)
    assert str(caught.value) == (
        f"Command(goto=...) takes a node, a node name, END, a Send, or a list of them; got "
        f"{goto!r} ({type(goto).__name__}). Write e.g. goto='review' or "
        f"goto=[Send(work, {{...}}), Send(work, {{...}})]."
    )


def test_a_goto_of_any_iterable_of_targets_is_still_taken() -> None:
    assert Command(goto=("b", END)).goto == ["b", END]
    assert Command(goto=(name for name in ["b"])).goto == ["b"]
    assert Command(goto=[b]).goto == [b]


def test_the_join_suggested_for_two_joins_to_one_node_is_itself_valid() -> None:
    @node
    def a(state: Any) -> None:
        return None

    @node
    def c(state: Any) -> None:
        return None

    @node
    def d(state: Any) -> None:
        return None

    with pytest.raises(GraphConfigError) as caught:
        Graph(BaseState).flow(START >> a >> [b, c, d], [b, c] >> d, [c, d] >> d, d >> END)
    assert (
        "Node 'd' is the target of two joins; list every node it waits on in one join: [b, c] >> d"
    ) in caught.value.problems
