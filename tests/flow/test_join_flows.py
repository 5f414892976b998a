"""Flows with chains, list edges and joins: how they are written and how flow() checks them."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from nodestep import END, START, BaseState, Command, Graph, GraphConfigError, Join, node, when


class S(BaseState):
    count: int = 0


@node
def a(state):
    return None


@node
def b(state):
    return None


@node
def b2(state):
    return None


@node
def c(state):
    return None


@node
def d(state):
    return None


@node
def e(state):
    return None


def _problems(*edges) -> tuple[str, ...]:
    with pytest.raises(GraphConfigError, match="Graph 'g' has an invalid flow") as info:
        Graph(S, name="g").flow(*edges)
    return info.value.problems


def test_a_chain_is_the_edges_it_is_written_with():
    graph = Graph(S).flow(START >> a >> b >> END)
    assert graph.start == "a"
    assert graph.edges == {"a": "b", "b": END}


def test_a_chain_goes_through_a_list_and_a_join():
    graph = Graph(S).flow(START >> a >> [b, c] >> d >> END)
    assert graph.edges == {
        "a": ("b", "c"),
        "b": Join("d", ("b", "c")),
        "c": Join("d", ("b", "c")),
        "d": END,
    }


def test_a_chain_cannot_go_on_after_end_or_a_route():
    with pytest.raises(TypeError, match=r"A chain cannot go on after END: only a node"):
        START >> a >> END >> b
    with pytest.raises(TypeError, match=r"cannot go on after when\(b, otherwise=END\)"):
        a >> when(bool, b, otherwise=END) >> c


def test_a_list_of_one_node_is_a_plain_edge():
    graph = Graph(S).flow(START >> a, a >> [b], [b] >> c, c >> END)
    assert graph.edges == {"a": "b", "b": "c", "c": END}


def test_a_join_to_end_ends_each_source():
    graph = Graph(S).flow(START >> a >> [b, c], [b, c] >> END)
    assert graph.edges == {"a": ("b", "c"), "b": END, "c": END}


def test_repeated_list_entries_count_once():
    graph = Graph(S).flow(START >> a >> [b, c, b], [b, c, c] >> d, d >> END)
    assert graph.edges["a"] == ("b", "c")
    assert graph.edges["b"] == Join("d", ("b", "c"))


def test_a_join_over_exclusive_routes_is_refused_with_why():
    (problem,) = _problems(
        START >> a,
        a >> when(bool, b, otherwise=c),
        [b, c] >> d,
        d >> END,
    )
    assert problem == (
        "The join [b, c] >> d can never fill: no run reaches both 'b' and 'c' in one turn (a "
        "when(...) or branch(...) picks one of them, and no edge leads from one to the "
        "other). Fan out to both, e.g. a >> [b, c] or Command(goto=[...]), or join only "
        "nodes that run in the same turn"
    )


def test_a_join_source_on_a_loop_is_accepted():
    graph = Graph(S).flow(
        START >> a >> [b, c],
        b >> when(bool, b, otherwise=b2),
        [b2, c] >> d,
        d >> END,
    )
    assert graph.edges["c"] == Join("d", ("b2", "c"))


def test_a_join_waiting_on_itself_is_refused():
    problems = _problems(START >> a >> [b, d], [b, d] >> d)
    assert any(p.startswith("The join [b, d] >> d waits on 'd' itself") for p in problems)


def test_a_join_waiting_on_a_node_after_it_is_refused():
    problems = _problems(START >> a >> [b, c], [b, e] >> d, c >> END, d >> e, e >> END)
    assert any(
        p.startswith("The join [b, e] >> d waits on 'e', which runs only after 'd'")
        for p in problems
    ), problems


def test_fan_outs_by_goto_and_send_can_feed_a_join():
    @node(goto=[b, c])
    def split(state):
        return Command(goto=[b, c])

    graph = Graph(S).flow(START >> split, [b, c] >> d, d >> END)
    assert graph.edges["b"] == Join("d", ("b", "c"))

    @node(goto=[b])
    def sends(state):
        return None

    when_b = when(bool, c, otherwise=e)
    graph = Graph(S).flow(START >> sends, b >> when_b, [c, e] >> d, d >> END)
    assert graph.edges["c"] == Join("d", ("c", "e"))


def test_two_joins_to_one_node_are_refused():
    problems = _problems(START >> a >> [b, c, e], [b, c] >> d, [e] >> d, [b2, e] >> d, d >> END)
    assert any("Node 'd' is the target of two joins" in p for p in problems), problems


def test_a_join_source_with_another_edge_is_refused():
    problems = _problems(START >> a >> [b, c], b >> END, [b, c] >> d, d >> END)
    assert any(
        p.startswith("Node 'b' is a source of the join [b, c] >> d and has another edge")
        for p in problems
    ), problems
    assert any("use the subgraph as the join's source" in p for p in problems)


def test_lists_that_hold_no_nodes_are_refused():
    def plain(state):
        return None

    problems = _problems(START >> a, a >> [], [b, plain] >> c, c >> END, b >> END)
    assert "The list after 'a' is empty; list at least one node" in problems
    assert any("plain function 'plain'" in p for p in problems)
    assert _problems(START >> a, a >> [b, END], b >> END)[0] == (
        "The list after 'a' holds END; a list of an edge holds nodes only"
    )


def test_start_leads_to_one_node_not_a_list():
    problems = _problems(START >> [a, b], a >> END, b >> END)
    assert problems[0].startswith("START leads to one node, not a list")


def test_a_join_that_leads_to_a_route_is_refused():
    problems = _problems(START >> a >> [b, c], [b, c] >> when(bool, d, otherwise=END))
    assert any("a join leads to one node (or END)" in p for p in problems), problems


def test_plain_function_in_a_join_names_the_fix():
    def plain(state):
        return None

    with pytest.raises(TypeError, match="plain function 'plain'"):
        plain >> a
    assert [plain, a] >> b is not None  # checked by flow(), which lists every problem


def test_drawing_shows_list_edges_and_joins():
    graph = Graph(S).flow(START >> a >> [b, c] >> d >> END)
    drawing = graph.to_mermaid()
    assert drawing.count(" --> ") == 4  # START, the two of the list, and END
    assert drawing.count("==>") == 2
    edges = graph.to_spec()["edges"]
    assert {"from": "a", "to": ["b", "c"]} in edges
    assert {"join": ["b", "c"], "to": "d"} in edges


class Item(BaseModel):
    index: int


@node(defer=True)
def later(state, item: Item):
    return None


def test_the_spec_names_deferred_nodes_and_input_models():
    nodes = Graph(S).flow(START >> a >> later >> END).to_spec()["nodes"]
    entry = next(n for n in nodes if n["name"] == "later")
    assert entry["defer"] is True
    assert entry["input"] == "test_join_flows:Item"
    assert "defer" not in nodes[0] and "input" not in nodes[0]
