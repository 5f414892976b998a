"""flow(): the whole graph is checked at once and every problem is reported in one error."""

from __future__ import annotations

from typing import Any

import pytest

from nodestep import END, START, BaseState, Command, Graph, GraphConfigError, branch, node, when


class S(BaseState):
    count: int = 0


@node
def a(state):
    return None


@node
def b(state):
    return None


@node
def c(state):
    return None


def _problems(*edges) -> tuple[str, ...]:
    with pytest.raises(GraphConfigError, match="Graph 'poll' has an invalid flow") as info:
        Graph(S, name="poll").flow(*edges)
    return info.value.problems


def test_valid_flow_returns_the_graph_and_its_routing_tables():
    graph = Graph(S)
    assert graph.flow(START >> a, a >> b, b >> END) is graph
    assert graph.start == "a"
    assert graph.edges == {"a": "b", "b": END}
    assert set(graph.nodes) == {"a", "b"}


def test_flow_without_a_start_edge_is_refused():
    assert _problems(a >> END) == ("The flow has no START edge; add START >> first_node",)


def test_flow_with_several_start_edges_is_refused():
    problems = _problems(START >> a, START >> b, a >> END, b >> END)
    assert problems == ("The flow has 2 START edges (to a, b); keep exactly one",)


def test_start_leading_to_end_is_refused():
    (problem,) = _problems(START >> END)
    assert problem == "START must lead to a node, not END; write START >> first_node"


def test_node_with_no_way_out_is_refused_with_its_fix():
    assert _problems(START >> a, a >> b) == (
        "Node 'b' has no outgoing edge, branch or goto; end it with 'b >> END'",
    )


def test_node_unreachable_from_start_is_refused_with_its_fix():
    (problem,) = _problems(START >> a, a >> END, b >> END)
    assert problem.startswith("Node 'b' is not reachable from START; ")
    assert "route to it from a reachable node" in problem


def test_two_edges_from_one_node_are_refused():
    problems = _problems(START >> a, a >> b, a >> c, b >> END, c >> END)
    problem = problems[0]
    assert problem.startswith(
        "Node 'a' has two edges; a node has one edge, when(...) or branch(...)"
    )
    assert "Use branch(...) to choose between targets" in problem


def test_two_different_nodes_with_one_name_are_refused():
    @node(name="a")
    def impostor(state):
        return None

    problems = _problems(START >> a, a >> impostor, impostor >> END)
    assert problems[0] == (
        "Two different nodes are named 'a'; give one of them another name with @node(name=...)"
    )


COLLISION = "Two different nodes are named 'a'; give one of them another name with @node(name=...)"


def _impostor() -> Any:
    @node(name="a")
    def impostor(state):
        return None

    return impostor


def test_a_name_collision_is_reported_alone_not_as_two_edges_of_one_node():
    impostor = _impostor()
    assert _problems(START >> a, a >> impostor, impostor >> END) == (COLLISION,)


def test_a_name_collision_is_reported_alone_not_as_a_join_source_with_another_edge():
    @node
    def d(state):
        return None

    impostor = _impostor()
    problems = _problems(START >> b, b >> [a, c], a >> END, [impostor, c] >> d, d >> END)
    assert problems == (COLLISION,)


def test_two_edges_of_another_node_are_still_reported_beside_a_name_collision():
    impostor = _impostor()
    problems = _problems(START >> a, a >> impostor, impostor >> END, b >> a, b >> END)
    assert problems[0] == COLLISION
    assert any(p.startswith("Node 'b' has two edges") for p in problems)
    assert not any(p.startswith("Node 'a' has two edges") for p in problems)


def test_goto_name_matching_no_node_is_refused():
    @node(goto=["nowhere"])
    def jumper(state):
        return None

    problems = _problems(START >> jumper, jumper >> END)
    assert problems == (
        "Node 'jumper' declares goto 'nowhere', which matches no node of the flow; "
        "fix the name or add the node to the flow",
    )


def test_goto_that_is_not_a_node_name_or_end_is_refused_when_the_node_is_made():
    with pytest.raises(GraphConfigError, match="Node 'jumper' declares the goto target 42"):

        @node(goto=[42])
        def jumper(state):
            return None


def test_something_that_is_not_an_edge_is_refused():
    (problem,) = _problems(START >> a, a >> END, a)
    assert problem.startswith("flow() takes edges like 'a >> b', got <node a>")


def test_edge_out_of_end_is_refused():
    problems = _problems(START >> a, a >> END, END >> b)
    assert "END cannot have an outgoing edge; remove the edge from END" in problems


def test_edge_to_something_that_is_not_a_node_is_refused():
    problems = _problems(START >> a, a >> "b")
    assert problems[0].startswith("The edge from 'a' goes to 'b'; an edge goes to a node, END")


def test_every_problem_is_reported_in_one_error():
    @node(name="a")
    def impostor(state):
        return None

    @node(goto=["ghost"])
    def jumper(state):
        return None

    @node
    def dead_end(state):
        return None

    @node
    def orphan(state):
        return None

    with pytest.raises(GraphConfigError, match="Graph 'poll' has an invalid flow") as info:
        Graph(S, name="poll").flow(
            START >> jumper,
            jumper >> b,
            b >> dead_end,
            b >> c,
            c >> END,
            orphan >> impostor,
            a >> END,
        )
    error = info.value
    assert isinstance(error, ValueError)
    # Each problem reads "what is wrong; how to fix it".
    assert sorted(p.split("; ")[0] for p in error.problems) == sorted(
        [
            "Two different nodes are named 'a'",
            "Node 'b' has two edges",
            "Node 'jumper' declares goto 'ghost', which matches no node of the flow",
            "Node 'dead_end' has no outgoing edge, branch or goto",
            "Node 'c' is not reachable from START",
            "Node 'orphan' is not reachable from START",
            "Node 'a' is not reachable from START",
        ]
    )
    assert all("; " in p for p in error.problems)
    message = str(error)
    assert message.startswith("Graph 'poll' has an invalid flow:\n")
    for problem in error.problems:
        assert f"\n- {problem}" in message


def test_several_start_edges_are_reported_with_the_other_problems():
    problems = _problems(START >> a, START >> b, a >> END, b >> c)
    assert problems == (
        "The flow has 2 START edges (to a, b); keep exactly one",
        "Node 'c' has no outgoing edge, branch or goto; end it with 'c >> END'",
    )


def test_second_flow_call_is_refused():
    graph = Graph(S, name="poll").flow(START >> a, a >> END)
    with pytest.raises(
        GraphConfigError, match="Graph 'poll' already has a flow; flow\\(\\) is called once"
    ) as info:
        graph.flow(START >> b, b >> END)
    assert info.value.problems == ("Graph 'poll' already has a flow; call flow() once",)
    assert graph.start == "a"


def test_failed_flow_call_leaves_the_graph_without_a_flow():
    graph = Graph(S, name="poll")
    with pytest.raises(GraphConfigError, match="The flow has no START edge"):
        graph.flow(a >> END)
    with pytest.raises(GraphConfigError, match="Graph 'poll' has no flow yet"):
        graph.invoke({})
    assert graph.flow(START >> a, a >> END) is graph


def test_goto_may_name_a_node_defined_later_or_itself():
    @node(goto=["later", "looper", END])
    def looper(state):
        return None

    @node
    def later(state):
        return None

    graph = Graph(S).flow(START >> looper, later >> END)
    assert graph.declared["looper"] == frozenset({"later", "looper", "END"})


def test_node_reachable_only_through_a_declared_goto_is_reachable():
    @node(goto=[b])
    def jumper(state):
        return Command(goto=b)

    graph = Graph(S).flow(START >> jumper, b >> END)
    assert set(graph.nodes) == {"jumper", "b"}


def test_node_reachable_through_when_or_branch_is_reachable():
    graph = Graph(S).flow(
        START >> a,
        a >> when(lambda s: True, b, otherwise=c),
        b >> branch(lambda s: "x", {"x": END, "y": c}),
        c >> END,
    )
    assert set(graph.nodes) == {"a", "b", "c"}


def test_breakpoints_must_name_nodes_of_the_flow():
    graph = Graph(S, interrupt_before=["ghost"])
    with pytest.raises(GraphConfigError, match="Breakpoints name unknown nodes: ghost"):
        graph.flow(START >> a, a >> END)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_steps": 0}, "max_steps must be a positive int, got 0"),
        ({"timeout": 0}, "timeout must be a positive number of seconds, got 0"),
        ({"state_store": object()}, "state_store must be a StateStore, got object"),
    ],
)
def test_graph_options_are_checked(kwargs, message):
    with pytest.raises(GraphConfigError, match=message):
        Graph(S, **kwargs)


def plain(state):
    return None


@pytest.mark.parametrize(
    ("edges", "where"),
    [
        ((START >> plain,), "The START edge"),
        ((START >> a, a >> plain), "The edge from 'a'"),
        ((START >> a, a >> END, plain), "flow()"),
    ],
    ids=["start-edge", "edge-target", "bare-item"],
)
def test_a_plain_function_in_a_flow_says_to_decorate_it_with_node(edges, where):
    problems = _problems(*edges)
    expected = f"{where} uses the plain function 'plain'; decorate it with @node"
    assert any(p.startswith(expected) for p in problems), problems


def test_a_plain_function_on_the_left_of_an_edge_says_to_decorate_it_with_node():
    with pytest.raises(TypeError, match="uses the plain function 'plain'; decorate it with @node"):
        plain >> a
    with pytest.raises(TypeError, match="An edge to END uses the plain function 'plain'"):
        plain >> END


def test_goto_targets_are_collected_through_any_number_of_goto_hops():
    @node(goto=[END])
    def third(state):
        return None

    @node(goto=[third])
    def second(state):
        return None

    @node(goto=[second])
    def entry(state):
        return None

    graph = Graph(S).flow(START >> entry)
    assert set(graph.nodes) == {"entry", "second", "third"}


def _goto_chain(tail: list) -> Graph:
    """``a`` goes to ``b``, ``b`` to ``c`` and ``c`` to ``d`` by goto alone, no edges."""

    @node
    def d(state: S):
        return {"count": state.count + 1}

    @node(goto=[d])
    def c(state: S):
        return Command(goto=d)

    @node(goto=[c])
    def b(state: S):
        return Command(goto=c)

    @node(goto=[b])
    def a(state: S):
        return Command(goto=b)

    return Graph(S).flow(START >> a, *(edge(d) for edge in tail))


def test_node_two_goto_hops_from_any_edge_is_part_of_the_flow_and_runs():
    graph = _goto_chain([lambda d: d >> END])
    assert set(graph.nodes) == {"a", "b", "c", "d"}
    assert graph.edges == {"d": END}
    events = list(graph.stream({}, stream_mode="updates"))
    assert [e.node for e in events if e.mode == "updates"] == ["a", "b", "c", "d"]
    assert events[-1].data.state.count == 1


def test_node_with_edges_reached_only_through_goto_hops_is_not_reported_unreachable():
    @node
    def e(state: S):
        return {"count": 10}

    graph = _goto_chain([lambda d: d >> e, lambda d: e >> END])
    assert set(graph.nodes) == {"a", "b", "c", "d", "e"}
    assert graph.invoke({}).state.count == 10


def test_a_node_state_check_refuses_the_state_when_the_flow_is_declared():
    @node
    def needs_total(state):
        return None

    def check(state: type) -> str | None:
        if "total" in state.model_fields:
            return None
        return f"Node 'needs_total' reads 'total', which {state.__name__} lacks; add it"

    needs_total.state_check = check
    with pytest.raises(GraphConfigError, match="its state S does not fit") as info:
        Graph(S).flow(START >> needs_total, needs_total >> a, a >> END)
    assert info.value.problems == ("Node 'needs_total' reads 'total', which S lacks; add it",)

    class WithTotal(S):
        total: int = 0

    Graph(WithTotal).flow(START >> needs_total, needs_total >> END)
