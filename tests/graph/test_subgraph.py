"""``subgraph()`` and a ``Graph`` in a flow: what the graph layer checks before any run."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    Node,
    node,
    subgraph,
)


class Reply(BaseState):
    question: str = ""
    answer: str = ""


class Ticket(BaseState):
    text: str = ""
    replies: list[str] = Field(default_factory=list)


@node
def respond(state: Reply) -> dict[str, Any]:
    return {"answer": f"re: {state.question}"}


replier = Graph(Reply, name="replier").flow(START >> respond, respond >> END)


def test_a_graph_in_an_edge_becomes_one_node_named_after_it() -> None:
    @node
    def after(state: Reply) -> None:
        return None

    graph = Graph(Reply, name="outer").flow(START >> replier, replier >> after, after >> END)
    assert list(graph.nodes) == ["replier", "after"]
    assert isinstance(graph.nodes["replier"], Node)
    assert repr(graph.nodes["replier"]) == "<subgraph replier: graph 'replier'>"
    assert "replier --> after" in graph.to_mermaid()


def test_a_child_of_another_state_class_needs_a_declared_mapping() -> None:
    with pytest.raises(GraphConfigError) as caught:
        Graph(Ticket).flow(START >> replier, replier >> END)
    assert caught.value.problems == (
        "Subgraph node 'replier' has state Reply and its graph Ticket, and nothing says "
        "which state flows between them; pass share=[fields both declare], or state_in= "
        "and state_out= to subgraph()",
    )


def test_one_mapping_function_is_not_enough_for_another_state_class() -> None:
    child = subgraph("reply", replier, state_in=lambda t: {"question": t.text})
    with pytest.raises(GraphConfigError, match="or state_out= to subgraph"):
        Graph(Ticket).flow(START >> child, child >> END)


def test_a_shared_field_must_be_declared_by_both_state_classes() -> None:
    child = subgraph("reply", replier, share=["text"])
    with pytest.raises(GraphConfigError, match="shares field 'text', which the subgraph's"):
        Graph(Ticket).flow(START >> child, child >> END)


def test_stream_subgraphs_takes_a_bool() -> None:
    graph = Graph(Reply, name="outer").flow(START >> replier, replier >> END)
    with pytest.raises(TypeError, match="True or False"):
        graph.stream({}, stream_mode="updates", subgraphs="yes")  # type: ignore[arg-type]


def test_subgraph_refuses_what_cannot_be_a_subgraph() -> None:
    with pytest.raises(TypeError, match="takes a Graph, got str"):
        subgraph("x", "replier")  # type: ignore[arg-type]
    with pytest.raises(GraphConfigError, match="has no flow yet"):
        subgraph("x", Graph(Reply))
    stored = Graph(Reply, name="stored", state_store=InMemoryStateStore())
    stored.flow(START >> respond, respond >> END)
    with pytest.raises(GraphConfigError, match="Graph 'stored' has its own state store"):
        subgraph("x", stored)
    with pytest.raises(TypeError, match="non-empty list of field names"):
        subgraph("x", replier, share="replies")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="non-empty list of field names"):
        subgraph("x", replier, share=[])
    with pytest.raises(TypeError, match=r"state_in=\.\.\.\) takes a function"):
        subgraph("x", replier, state_in={"question": "q"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="node name must be a non-blank string"):
        subgraph("", replier)


def test_only_a_graph_with_subgraph_nodes_is_marked_nested() -> None:
    # A nested graph's runs serialise their commits (engine.subgraph_writer); others do not.
    assert replier._engine_graph().nested is False
    outer = Graph(Reply, name="outer").flow(START >> replier, replier >> END)
    assert outer._engine_graph().nested is True
