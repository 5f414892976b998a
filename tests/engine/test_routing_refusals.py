"""Routes a run refuses: routers that change the state, impostor targets, nodes left without one."""

from __future__ import annotations

import copy
from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    GraphExecutionError,
    InMemoryStateStore,
    Send,
    add,
    branch,
    merge_dict,
    node,
    when,
)


class S(BaseState):
    count: int = 0
    items: list[str] = Field(default_factory=list)
    log: Annotated[list[str], add] = Field(default_factory=list)
    table: Annotated[dict[str, int], merge_dict] = Field(default_factory=dict)


START_VALUES: dict[str, Any] = {"count": 1, "items": ["a"], "log": ["start"], "table": {"k": 1}}


@node
def first(state: S):
    return None


@node
def done(state: S):
    return {"log": ["done"]}


# -- routers and predicates read a copy -----------------------------------------------------


def _by_branch(router: Any) -> Graph:
    return Graph(S, state_store=InMemoryStateStore()).flow(
        START >> first, first >> branch(router, {"go": done}), done >> END
    )


def _by_when(predicate: Any) -> Graph:
    return Graph(S, state_store=InMemoryStateStore()).flow(
        START >> first, first >> when(predicate, done, otherwise=END), done >> END
    )


def appends_to_items(state: S) -> str:
    state.items.append("router")
    return "go"


def test_branch_router_that_changes_the_state_in_place_is_refused():
    graph = _by_branch(appends_to_items)
    with pytest.raises(
        GraphExecutionError,
        match=r"^The branch\(\) router test_routing_refusals:appends_to_items after node 'first' "
        r"changed 'items' of the state in place\. Routers and predicates only read the state: "
        r"they get a copy, so the change would be lost\. Make the change in a node",
    ):
        graph.invoke(START_VALUES, thread_id="t")
    assert graph.get_state_sync("t").value.items == ["a"]


def test_when_predicate_that_assigns_a_field_is_refused():
    def bumps_count(state: S) -> bool:
        state.count += 1
        return True

    graph = _by_when(bumps_count)
    with pytest.raises(
        GraphExecutionError,
        match=r"^The when\(\) predicate test_routing_refusals:"
        r"test_when_predicate_that_assigns_a_field_is_refused\.<locals>\.bumps_count after node "
        r"'first' changed 'count' of the state in place\.",
    ):
        graph.invoke(START_VALUES, thread_id="t")
    assert graph.get_state_sync("t").value.count == 1


def test_routers_that_only_read_mutable_fields_run_and_see_the_merged_state():
    seen: list[Any] = []

    def reads(state: S) -> str:
        seen.append((state.count, list(state.items), list(state.log), dict(state.table)))
        return "go"

    def reads_too(state: S) -> bool:
        return state.items[-1] == "a" and "start" in state.log and state.table["k"] == 1

    assert _by_branch(reads).invoke(START_VALUES, thread_id="t").state.log == ["start", "done"]
    assert seen == [(1, ["a"], ["start"], {"k": 1})]
    assert _by_when(reads_too).invoke(START_VALUES, thread_id="t").state.log == ["start", "done"]


Change = tuple[str, Any]

changes = st.lists(
    st.one_of(
        st.tuples(st.just("count"), st.integers(min_value=-3, max_value=3)),
        st.tuples(st.just("items"), st.text(max_size=2)),
        st.tuples(st.just("log"), st.text(max_size=2)),
        st.tuples(st.just("table"), st.sampled_from(["k", "new"])),
        st.tuples(st.just("read"), st.sampled_from(["items", "log", "table"])),
    ),
    max_size=4,
)


def _apply(state: S, change: Change) -> None:
    field, arg = change
    if field == "count":
        state.count += arg
    elif field == "items":
        state.items.append(arg)
    elif field == "log":
        state.log.insert(0, arg)
    elif field == "table":
        state.table[arg] = state.table.get(arg, 0) + 1
    else:
        getattr(state, arg)  # a read alone changes nothing


@settings(max_examples=60, deadline=None)
@given(changes, st.booleans())
def test_a_router_changes_nothing_and_is_refused_exactly_when_it_changed_its_copy(
    script: list[Change], as_branch: bool
):
    def router(state: S) -> Any:
        for change in script:
            _apply(state, change)
        return "go" if as_branch else True

    expected = S.model_validate(copy.deepcopy(START_VALUES))
    for change in script:
        _apply(expected, change)
    changed = expected.model_dump() != S.model_validate(START_VALUES).model_dump()
    graph = _by_branch(router) if as_branch else _by_when(router)
    if changed:
        with pytest.raises(GraphExecutionError, match="of the state in place"):
            graph.invoke(START_VALUES, thread_id="t")
        after = graph.get_state_sync("t").value.model_dump()
        assert {k: after[k] for k in START_VALUES} == START_VALUES
    else:
        assert graph.invoke(START_VALUES, thread_id="t").state.log == ["start", "done"]


# -- a target must be the flow's node, not a namesake ---------------------------------------


@node
def worker(state: S):
    return {"log": ["worker"]}


def _impostor() -> Any:
    @node(name="worker")
    def impostor(state: S):
        return {"log": ["impostor"]}

    return impostor


IMPOSTOR_MESSAGE = (
    r"^Node 'boss' routed to a node named 'worker' made from "
    r"test_routing_refusals:_impostor\.<locals>\.impostor, but the flow's node 'worker' is made "
    r"from test_routing_refusals:worker\. The name would run the flow's node, not the one "
    r"given: route to the node object that is in the flow, or give the other function its own "
    r"name with @node\(name=\.\.\.\) and add it to the flow\.$"
)


@pytest.mark.parametrize(
    "route",
    [
        lambda other: Command(goto=other),
        lambda other: Send(other),
        lambda other: Command(goto=[Send(other)]),
    ],
    ids=["command-goto", "send", "send-in-command"],
)
def test_routing_to_another_node_with_a_registered_name_is_refused(route):
    other = _impostor()

    @node(goto=[worker])
    def boss(state: S):
        return route(other)

    graph = Graph(S).flow(START >> boss, worker >> END)
    with pytest.raises(GraphExecutionError, match=IMPOSTOR_MESSAGE):
        graph.invoke({})


@pytest.mark.parametrize(
    "route",
    [lambda: Command(goto=worker), lambda: Command(goto="worker"), lambda: Send(worker)],
    ids=["node", "name", "send"],
)
def test_routing_to_the_flow_node_by_object_or_name_runs_it(route):
    @node(goto=[worker])
    def boss(state: S):
        return route()

    graph = Graph(S).flow(START >> boss, worker >> END)
    assert graph.invoke({}).state.log == ["worker"]


# -- a node without edges must return a route -----------------------------------------------


@pytest.mark.parametrize(
    ("returned", "shown"),
    [
        (lambda state: None, "None"),
        (lambda state: {"count": 2}, "an update"),
        (lambda state: Command(update={"count": 2}), "a Command without goto"),
    ],
    ids=["none", "dict", "command-without-goto"],
)
def test_goto_only_node_that_returns_no_route_is_refused(returned, shown):
    chooser = node(returned, name="chooser", goto=[worker, END])
    graph = Graph(S).flow(START >> chooser, worker >> END)
    with pytest.raises(
        GraphExecutionError,
        match=r"^Node 'chooser' has no edge and returned no route, so the run cannot tell what "
        r"runs next\. A node without an edge routes only by what it returns: "
        r"Command\(goto=\.\.\.\) or Send\(\.\.\.\) with one of its declared targets "
        r"\(END, worker\), or END to stop this path\. Return one of those, or add an edge "
        r"such as 'chooser >> END'\.$",
    ):
        graph.invoke({})


def test_goto_only_node_that_changes_its_state_in_place_and_returns_it_is_refused():
    @node(goto=[worker])
    def chooser(state: S):
        state.count = 5
        return state

    graph = Graph(S).flow(START >> chooser, worker >> END)
    with pytest.raises(
        GraphExecutionError, match=r"^Node 'chooser' has no edge and returned no route"
    ):
        graph.invoke({})


def test_refused_goto_only_task_is_not_kept_so_a_fixed_node_continues_the_thread():
    store = InMemoryStateStore()

    @node(goto=[worker])
    def chooser(state: S):
        return None

    with pytest.raises(GraphExecutionError, match="returned no route"):
        Graph(S, state_store=store).flow(START >> chooser, worker >> END).invoke({}, thread_id="t")

    @node(name="chooser", goto=[worker])
    def fixed(state: S):
        return Command(goto=worker)

    graph = Graph(S, state_store=store).flow(START >> fixed, worker >> END)
    assert graph.invoke(None, thread_id="t").state.log == ["worker"]


@pytest.mark.parametrize(
    "returned", [END, Command(goto=END), Command(goto=[])], ids=["END", "goto-END", "goto-nothing"]
)
def test_goto_only_node_that_ends_its_path_explicitly_completes(returned):
    chooser = node(lambda state: returned, name="chooser", goto=[worker, END])
    graph = Graph(S).flow(START >> chooser, worker >> END)
    result = graph.invoke({})
    assert result.status == "completed"
    assert result.state.log == []


def test_routing_to_a_second_node_object_of_the_same_function_is_refused():
    class Service:
        def work(self, state: S):
            return {"log": ["service"]}

    service = Service()
    in_flow, second = node(service.work), node(service.work)

    @node(goto=[in_flow])
    def boss(state: S):
        return Command(goto=second)

    graph = Graph(S).flow(START >> boss, in_flow >> END)
    with pytest.raises(
        GraphExecutionError,
        match=r"^Node 'boss' routed to a node named 'work' made from test_routing_refusals:"
        r"test_routing_to_a_second_node_object_of_the_same_function_is_refused\.<locals>\."
        r"Service\.work \(another node object\), but the flow's node 'work' is made from "
        r"test_routing_refusals:",
    ):
        graph.invoke({})
