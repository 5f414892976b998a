"""Running a graph: supersteps, routing, return values, failures, limits and threads."""

from __future__ import annotations

import threading
import time
from typing import Annotated, Any

import anyio
import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    GraphConfigError,
    GraphExecutionError,
    GraphTimeoutError,
    InMemoryStateStore,
    InvalidUpdateError,
    Node,
    NodeContext,
    NodeTimeoutError,
    Replace,
    RunLimitExceededError,
    Send,
    StateStoreError,
    StateUpdateError,
    add,
    branch,
    merge_dict,
    node,
    when,
)


def keep_last(current: Any, update: Any) -> Any:
    return update


class S(BaseState):
    count: int = 0
    note: str = ""
    item: int = 0
    log: Annotated[list[str], add] = Field(default_factory=list)
    seen: Annotated[dict[str, int], merge_dict] = Field(default_factory=dict)
    custom: Annotated[list[int], keep_last] = Field(default_factory=list)


def fan_to(*targets: str, name: str = "fan"):
    """A node that routes to several nodes at once."""

    def fan(state):
        return Command(goto=list(targets))

    return node(fan, name=name, goto=list(targets))


def updates_of(graph: Graph[Any], input: Any = None, **kwargs: Any) -> list[tuple[int, str, Any]]:
    return [
        (e.step, e.task_id, e.data)
        for e in graph.stream(input or {}, stream_mode="updates", **kwargs)
        if e.mode == "updates"
    ]


# -- supersteps ---------------------------------------------------------------------------


def test_superstep_zero_runs_the_node_after_start_on_the_validated_input():
    seen: list[Any] = []

    @node
    def first(state: S, ctx: NodeContext):
        seen.append((ctx.step, state.count, type(state).__name__))
        return None

    Graph(S).flow(START >> first, first >> END).invoke({"count": "7"})
    assert seen == [(0, 7, "S")]


def test_each_edge_starts_the_next_superstep():
    steps: list[tuple[str, int]] = []

    def make(name: str):
        def f(state: S, ctx: NodeContext):
            steps.append((name, ctx.step))
            return {"log": [name]}

        return node(f, name=name)

    a, b, c = make("a"), make("b"), make("c")
    result = Graph(S).flow(START >> a, a >> b, b >> c, c >> END).invoke({})
    assert steps == [("a", 0), ("b", 1), ("c", 2)]
    assert result.state.log == ["a", "b", "c"]
    assert result.step == 2


@pytest.mark.anyio
async def test_writes_merge_in_node_name_order_whatever_order_tasks_finish():
    # They finish gamma, beta, alpha: each waits for the one before it.
    beta_done, gamma_done = anyio.Event(), anyio.Event()

    @node
    async def alpha(state: S):
        await beta_done.wait()
        return {"log": ["alpha"]}

    @node
    async def beta(state: S):
        await gamma_done.wait()
        beta_done.set()
        return {"log": ["beta"]}

    @node
    async def gamma(state: S):
        gamma_done.set()
        return {"log": ["gamma"]}

    fan = fan_to("gamma", "alpha", "beta")
    graph = Graph(S).flow(START >> fan, alpha >> END, beta >> END, gamma >> END)
    assert (await graph.ainvoke({})).state.log == ["alpha", "beta", "gamma"]


def test_routes_resolve_on_the_merged_state_of_the_superstep():
    @node
    def writer(state: S):
        return {"count": 1}

    @node
    def router_owner(state: S):
        return None

    @node
    def yes(state: S):
        return {"note": "yes"}

    @node
    def no(state: S):
        return {"note": "no"}

    fan = fan_to("writer", "router_owner")
    graph = Graph(S).flow(
        START >> fan,
        writer >> END,
        router_owner >> when(lambda s: s.count == 1, yes, otherwise=no),
        yes >> END,
        no >> END,
    )
    assert graph.invoke({}).state.note == "yes"


def test_branch_router_sees_the_merged_state():
    @node
    def writer(state: S):
        return {"note": "right"}

    @node
    def chooser(state: S):
        return None

    @node
    def left(state: S):
        return {"log": ["left"]}

    @node
    def right(state: S):
        return {"log": ["right"]}

    fan = fan_to("writer", "chooser")
    graph = Graph(S).flow(
        START >> fan,
        writer >> END,
        chooser >> branch(lambda s: s.note, {"left": left, "right": right}),
        left >> END,
        right >> END,
    )
    assert graph.invoke({}).state.log == ["right"]


def test_a_node_named_by_several_tasks_runs_once_in_the_next_superstep():
    runs: list[int] = []

    @node
    def b(state: S):
        return {"log": ["b"]}

    @node
    def c(state: S):
        return {"log": ["c"]}

    @node
    def join(state: S, ctx: NodeContext):
        runs.append(ctx.step)
        return {"log": ["join"]}

    graph = Graph(S).flow(START >> fan_to("b", "c"), b >> join, c >> join, join >> END)
    result = graph.invoke({})
    assert runs == [2]
    assert result.state.log == ["b", "c", "join"]


def test_there_is_no_join_barrier_a_node_runs_whenever_a_route_reaches_it():
    runs: list[tuple[int, list[str]]] = []

    @node
    def short(state: S):
        return {"log": ["short"]}

    @node
    def long1(state: S):
        return {"log": ["long1"]}

    @node
    def long2(state: S):
        return {"log": ["long2"]}

    @node
    def join(state: S, ctx: NodeContext):
        runs.append((ctx.step, list(state.log)))
        return None

    graph = Graph(S).flow(
        START >> fan_to("short", "long1"),
        short >> join,
        long1 >> long2,
        long2 >> join,
        join >> END,
    )
    graph.invoke({})
    assert runs == [(2, ["long1", "short"]), (3, ["long1", "short", "long2"])]


def test_run_ends_when_a_superstep_yields_no_tasks():
    @node
    def only(state: S):
        return {"count": 1}

    result = Graph(S).flow(START >> only, only >> END).invoke({})
    assert (result.status, result.step, result.state.count) == ("completed", 0, 1)


# -- Send -----------------------------------------------------------------------------------


def scattering_to(worker: Node) -> Node:
    """A node that sends ``worker`` three tasks, with items 1, 2 and 3."""

    @node(goto=[worker])
    def scatter(state: S):
        return Command(goto=[Send(worker, {"item": i}) for i in (1, 2, 3)])

    return scatter


def test_each_send_is_its_own_task_with_the_payload_laid_over_its_state():
    seen: list[tuple[str, int, int]] = []

    @node
    def worker(state: S, ctx: NodeContext):
        seen.append((ctx.task_id, state.item, state.count))
        return {"log": [f"{ctx.task_id}:{state.item}"]}

    graph = Graph(S).flow(START >> scattering_to(worker), worker >> END)
    result = graph.invoke({"count": 5})
    assert sorted(seen) == [("worker", 1, 5), ("worker[1]", 2, 5), ("worker[2]", 3, 5)]
    assert result.state.log == ["worker:1", "worker[1]:2", "worker[2]:3"]


def test_send_payload_is_not_kept_in_the_state():
    @node
    def worker(state: S):
        return None

    result = Graph(S).flow(START >> scattering_to(worker), worker >> END).invoke({"item": 9})
    assert result.state.item == 9


def test_send_payload_skips_the_fields_reducer():
    seen: list[list[str]] = []

    @node(goto=["worker"])
    def send_log(state: S):
        return Send(worker, {"log": ["payload"]})

    @node
    def worker(state: S):
        seen.append(list(state.log))
        return None

    result = Graph(S).flow(START >> send_log, worker >> END).invoke({"log": ["kept"]})
    assert seen == [["payload"]]
    assert result.state.log == ["kept"]


def test_send_payload_with_an_unknown_field_fails_the_run():
    @node(goto=["worker"])
    def bad_send(state: S):
        return Send(worker, {"nope": 1})

    @node
    def worker(state: S):
        return None

    graph = Graph(S).flow(START >> bad_send, worker >> END)
    with pytest.raises(
        StateUpdateError,
        match="sent a payload to 'worker' with 'nope', which is not a field of S",
    ):
        graph.invoke({})


class Measured(BaseState):
    item: int = 0
    ratio: float = 0.0


def test_an_invalid_send_payload_names_the_target_node():
    @node(goto=["worker"])
    def bad_value(state: Measured):
        return Send(worker, {"item": "many"})

    @node(goto=["worker"])
    def unstorable(state: Measured):
        return Send(worker, {"ratio": float("nan")})

    @node
    def worker(state: Measured):
        return None

    graph = Graph(Measured).flow(START >> bad_value, worker >> END)
    with pytest.raises(StateUpdateError) as caught:
        graph.invoke({})
    assert str(caught.value).startswith(
        "Node 'bad_value' sent 'worker' an invalid payload: Field 'item' got an invalid "
        "value from 'bad_value': Input should be a valid integer"
    )
    assert (caught.value.field, caught.value.writer) == ("item", "bad_value")
    stored = Graph(Measured, state_store=InMemoryStateStore())
    stored.flow(START >> unstorable, worker >> END)
    with pytest.raises(StateStoreError) as caught_store:
        stored.invoke({}, thread_id="t")
    assert str(caught_store.value).startswith(
        "Node 'unstorable' sent 'worker' a payload that cannot be stored: Field 'ratio' holds "
        "a float that JSON cannot store"
    )


@pytest.mark.parametrize(
    "route",
    [
        lambda target: Send(target, {"item": 7}),
        lambda target: Send(target.name, {"item": 7}),
        lambda target: Command(update={"item": 7}, goto=target),
        lambda target: Command(update={"item": 7}, goto=target.name),
    ],
    ids=["send-node", "send-name", "goto-node", "goto-name"],
)
def test_send_and_goto_take_a_node_or_its_name_under_one_rule(route):
    @node
    def worker(state: S):
        return {"log": [f"worker saw {state.item}"]}

    @node
    def other(state: S):
        return None

    @node(goto=[worker])
    def dispatch(state: S):
        return route(worker)

    @node(goto=[worker])
    def stray(state: S):  # 'other' is in the flow, but not one of its declared targets
        return route(other)

    graph = Graph(S).flow(START >> dispatch, worker >> END)
    assert graph.invoke({}).state.log == ["worker saw 7"]
    strays = Graph(S).flow(START >> stray, stray >> other, worker >> END, other >> END)
    with pytest.raises(GraphExecutionError, match=r"routed to 'other', which is not declared"):
        strays.invoke({})


def test_edge_task_and_sends_of_one_node_get_indexed_task_ids():
    @node(goto=["worker"])
    def mixed(state: S):
        return Command(goto=["worker", Send(worker, {"item": 1}), Send(worker, {"item": 2})])

    @node
    def worker(state: S, ctx: NodeContext):
        return {"log": [f"{ctx.task_id}={state.item}"]}

    result = Graph(S).flow(START >> mixed, worker >> END).invoke({})
    assert result.state.log == ["worker=0", "worker[1]=1", "worker[2]=2"]


# -- return values --------------------------------------------------------------------------


def test_command_goto_replaces_the_nodes_edges_for_that_run():
    ran: list[str] = []

    @node(goto=["other"])
    def first(state: S):
        return Command(update={"count": 1}, goto="other")

    @node
    def after(state: S):
        ran.append("after")
        return None

    @node
    def other(state: S):
        ran.append("other")
        return None

    result = Graph(S).flow(START >> first, first >> after, after >> END, other >> END).invoke({})
    assert ran == ["other"]
    assert result.state.count == 1


def test_command_without_goto_follows_the_edges():
    ran: list[str] = []

    @node
    def first(state: S):
        return Command(update={"count": 1})

    @node
    def after(state: S):
        ran.append("after")
        return None

    result = Graph(S).flow(START >> first, first >> after, after >> END).invoke({})
    assert ran == ["after"]
    assert result.state.count == 1


def test_command_with_an_empty_goto_routes_nowhere():
    ran: list[str] = []

    @node
    def first(state: S):
        return Command(update={"count": 1}, goto=[])

    @node
    def after(state: S):
        ran.append("after")
        return None

    result = Graph(S).flow(START >> first, first >> after, after >> END).invoke({})
    assert ran == []
    assert (result.status, result.state.count) == ("completed", 1)


def test_command_goto_to_an_undeclared_target_fails_the_run():
    @node(goto=["other"])
    def first(state: S):
        return Command(goto="after")

    @node
    def after(state: S):
        return None

    @node
    def other(state: S):
        return None

    graph = Graph(S).flow(START >> first, first >> after, after >> END, other >> END)
    with pytest.raises(
        GraphExecutionError,
        match=(
            r"Node 'first' routed to 'after', which is not declared in its "
            r"@node\(goto=\[\.\.\.\]\) \(declared: other\)"
        ),
    ):
        graph.invoke({})


def test_command_goto_end_must_be_declared():
    @node
    def first(state: S):
        return Command(goto=END)

    graph = Graph(S).flow(START >> first, first >> END)
    with pytest.raises(
        GraphExecutionError,
        match=r"routed to 'END', which is not declared .* \(declared: nothing\)",
    ):
        graph.invoke({})


def test_send_to_an_undeclared_node_fails_the_run():
    @node
    def first(state: S):
        return Send(worker, {})

    @node
    def worker(state: S):
        return None

    graph = Graph(S).flow(START >> first, first >> worker, worker >> END)
    with pytest.raises(
        GraphExecutionError, match="Node 'first' routed to 'worker', which is not declared"
    ):
        graph.invoke({})


def test_a_node_may_goto_itself_by_name():
    @node(goto=["again", END])
    def again(state: S):
        if state.count < 3:
            return Command(update={"count": state.count + 1}, goto="again")
        return Command(goto=END)

    result = Graph(S).flow(START >> again).invoke({})
    assert (result.state.count, result.step) == (3, 3)


def test_returning_end_stops_the_nodes_routes_without_a_declaration():
    ran: list[str] = []

    @node
    def first(state: S):
        return END

    @node
    def after(state: S):
        ran.append("after")
        return None

    result = Graph(S).flow(START >> first, first >> after, after >> END).invoke({})
    assert ran == []
    assert result.status == "completed"


def test_returning_none_writes_nothing_and_follows_the_edges():
    @node
    def first(state: S):
        return None

    @node
    def after(state: S):
        return {"count": 2}

    assert updates_of(Graph(S).flow(START >> first, first >> after, after >> END)) == [
        (0, "first", None),
        (1, "after", {"count": 2}),
    ]


def test_returning_a_dict_subclass_is_an_update():
    class Update(dict):
        pass

    @node
    def first(state: S):
        return Update(count=4)

    assert Graph(S).flow(START >> first, first >> END).invoke({}).state.count == 4


def test_returning_the_state_changed_in_place_stores_the_difference():
    @node
    def first(state: S):
        state.count = 3
        state.log.append("new")
        state.seen["b"] = 2
        state.seen["a"] = 9
        return state

    graph = Graph(S).flow(START >> first, first >> END)
    input = {"log": ["old"], "seen": {"a": 1, "c": 3}}
    assert updates_of(graph, input) == [
        (0, "first", {"count": 3, "log": ["new"], "seen": {"a": 9, "b": 2}}),
    ]
    result = graph.invoke(input)
    assert result.state.log == ["old", "new"]
    assert result.state.seen == {"a": 9, "c": 3, "b": 2}


def test_in_place_change_that_is_not_an_append_replaces_an_add_field():
    @node
    def first(state: S):
        state.log.pop(0)
        return state

    result = Graph(S).flow(START >> first, first >> END).invoke({"log": ["a", "b"]})
    assert result.state.log == ["b"]


def test_in_place_removal_of_a_key_replaces_a_merge_dict_field():
    @node
    def first(state: S):
        del state.seen["a"]
        return state

    result = Graph(S).flow(START >> first, first >> END).invoke({"seen": {"a": 1, "b": 2}})
    assert result.state.seen == {"b": 2}


def test_in_place_replace_of_a_reducer_field_conflicts_with_another_writer():
    @node
    def trimmer(state: S):
        state.log.clear()
        return state

    @node
    def appender(state: S):
        return {"log": ["x"]}

    graph = Graph(S).flow(START >> fan_to("trimmer", "appender"), trimmer >> END, appender >> END)
    with pytest.raises(
        InvalidUpdateError, match=r"a Replace\(\.\.\.\) write does not merge"
    ) as info:
        graph.invoke({"log": ["a"]})
    assert (info.value.field, info.value.writers) == ("log", ("appender", "trimmer"))


def test_in_place_change_of_a_custom_reducer_field_fails_the_run():
    @node
    def first(state: S):
        state.custom.append(1)
        return state

    graph = Graph(S).flow(START >> first, first >> END)
    with pytest.raises(
        GraphExecutionError,
        match="Node 'first' changed field 'custom' in place, but the field's reducer is a custom",
    ):
        graph.invoke({})


def test_changing_state_in_place_and_returning_a_dict_fails_the_run():
    @node
    def first(state: S):
        state.log.append("x")
        return {"count": 1}

    graph = Graph(S).flow(START >> first, first >> END)
    with pytest.raises(
        GraphExecutionError,
        match=r"Node 'first' changed 'log' of its state in place and also returned a dict\. Pick",
    ):
        graph.invoke({})


def test_changing_state_in_place_and_returning_none_fails_the_run():
    @node
    def first(state: S):
        state.count = 5
        return None

    graph = Graph(S).flow(START >> first, first >> END)
    with pytest.raises(
        GraphExecutionError, match="changed 'count' of its state in place and also returned None"
    ):
        graph.invoke({})


@pytest.mark.parametrize("returned", [42, "text", ["list"], (1,), S()])
def test_any_other_return_value_is_a_type_error_naming_the_node(returned):
    @node
    def odd(state: S):
        return returned

    graph = Graph(S).flow(START >> odd, odd >> END)
    with pytest.raises(
        TypeError,
        match=rf"Node 'odd' returned an? {type(returned).__name__}\. A node returns a dict update",
    ):
        graph.invoke({})


# -- failures -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_first_failure_in_scheduling_order_is_raised_unchanged():
    raised: dict[str, Exception] = {}
    beta_failed = anyio.Event()

    @node
    async def alpha(state: S):
        await beta_failed.wait()
        raised["alpha"] = ValueError("alpha failed")
        raise raised["alpha"]

    @node
    async def beta(state: S):
        raised["beta"] = KeyError("beta failed first")
        beta_failed.set()
        raise raised["beta"]

    graph = Graph(S).flow(START >> fan_to("beta", "alpha"), alpha >> END, beta >> END)
    with pytest.raises(ValueError, match="alpha failed") as info:
        await graph.ainvoke({})
    assert info.value is raised["alpha"]


@pytest.mark.anyio
async def test_the_first_failure_in_scheduling_order_is_raised_for_sync_nodes_too():
    beta_failed = threading.Event()

    @node
    def alpha(state: S):
        assert beta_failed.wait(5)
        raise ValueError("alpha failed")

    @node
    def beta(state: S):
        beta_failed.set()
        raise KeyError("beta failed first")

    graph = Graph(S).flow(START >> fan_to("beta", "alpha"), alpha >> END, beta >> END)
    with pytest.raises(ValueError, match="alpha failed"):
        await graph.ainvoke({})


@pytest.mark.anyio
async def test_every_task_of_a_failing_superstep_runs_to_completion():
    finished: list[str] = []

    @node
    async def fails(state: S):
        raise RuntimeError("boom")

    @node
    async def slow(state: S):
        await anyio.wait_all_tasks_blocked()  # fails has failed, and the run took it
        finished.append("slow")
        return None

    graph = Graph(S).flow(START >> fan_to("fails", "slow"), fails >> END, slow >> END)
    with pytest.raises(RuntimeError, match=r"^boom$"):
        await graph.ainvoke({})
    assert finished == ["slow"]


@pytest.mark.anyio
async def test_the_writes_of_a_failing_superstep_are_not_merged():
    @node
    def fails(state: S):
        raise RuntimeError("boom")

    @node
    def writes(state: S):
        return {"count": 1}

    graph = Graph(S).flow(START >> fan_to("fails", "writes"), fails >> END, writes >> END)
    events = []
    with pytest.raises(RuntimeError, match=r"^boom$"):
        async for event in graph.astream({}, stream_mode=["updates", "values"]):
            events.append(event)
    assert [(e.mode, e.step) for e in events] == [("updates", 0), ("values", 0)]
    store = InMemoryStateStore()
    with pytest.raises(RuntimeError, match=r"^boom$"):
        await graph.ainvoke({}, thread_id="t", state_store=store)
    assert (await graph.load("t", state_store=store))["count"] == 0


@pytest.mark.anyio
async def test_keyboard_interrupt_in_a_lone_node_propagates():
    @node
    def stop(state: S):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await Graph(S).flow(START >> stop, stop >> END).ainvoke({})


@pytest.mark.anyio
async def test_keyboard_interrupt_in_a_worker_thread_propagates():
    @node
    def stop(state: S):
        raise KeyboardInterrupt

    @node
    def fine(state: S):
        return None

    graph = Graph(S).flow(START >> fan_to("stop", "fine"), stop >> END, fine >> END)
    with pytest.raises(KeyboardInterrupt):
        await graph.ainvoke({})


@pytest.mark.anyio
async def test_system_exit_in_a_superstep_of_several_tasks_propagates():
    @node
    async def stop(state: S):
        raise SystemExit(3)

    @node
    async def fine(state: S):
        return None

    graph = Graph(S).flow(START >> fan_to("stop", "fine"), stop >> END, fine >> END)
    with pytest.raises(SystemExit) as info:
        await graph.ainvoke({})
    assert info.value.code == 3


def test_when_predicate_returning_a_non_bool_fails_the_run():
    @node
    def first(state: S):
        return None

    graph = Graph(S).flow(START >> first, first >> when(lambda s: "yes", END, otherwise=END))
    with pytest.raises(
        GraphExecutionError,
        match="The when\\(\\) predicate after 'first' returned 'yes'; it must return True or False",
    ):
        graph.invoke({})


def test_branch_router_returning_an_unknown_key_fails_the_run():
    @node
    def first(state: S):
        return None

    graph = Graph(S).flow(START >> first, first >> branch(lambda s: "c", {"a": END, "b": END}))
    with pytest.raises(
        GraphExecutionError,
        match="router after 'first' returned 'c', which is not a key of its mapping \\('a', 'b'\\)",
    ):
        graph.invoke({})


def _logging(name: str) -> Node:
    def write(state: S) -> dict:
        return {"log": [name]}

    return node(write, name=name)


@pytest.mark.parametrize(
    ("keys", "log"),
    [
        (["b", "c"], ["a", "b", "c"]),
        (("c", "b", "c"), ["a", "b", "c"]),
        (["b", "stop"], ["a", "b"]),
        ([], ["a"]),
    ],
)
def test_branch_router_returning_a_list_of_keys_runs_each_mapped_target(keys, log):
    a, b, c = _logging("a"), _logging("b"), _logging("c")
    route = branch(lambda s: keys, {"b": b, "c": c, "stop": END})
    graph = Graph(S).flow(START >> a, a >> route, b >> END, c >> END)
    assert graph.invoke({}).state.log == log


def test_branch_router_list_with_an_unknown_key_fails_the_run_naming_the_key_and_the_list():
    a, b = _logging("a"), _logging("b")
    graph = Graph(S).flow(START >> a, a >> branch(lambda s: ["b", "x"], {"b": b}), b >> END)
    with pytest.raises(GraphExecutionError) as info:
        graph.invoke({})
    assert str(info.value) == (
        "The branch() router after 'a' returned 'x' in the list ['b', 'x'], which is not a key "
        "of its mapping ('b'). Return one of those keys (or a list of them, to run each), or "
        "add 'x' to the mapping."
    )


def test_branch_router_returning_a_tuple_that_is_a_key_takes_that_key():
    a, b, c = _logging("a"), _logging("b"), _logging("c")
    route = branch(lambda s: ("b", "c"), {("b", "c"): b, "c": c})
    graph = Graph(S).flow(START >> a, a >> route, b >> END, c >> END)
    assert graph.invoke({}).state.log == ["a", "b"]


def test_two_nodes_writing_a_plain_field_fail_the_run_with_invalid_update():
    @node
    def a(state: S):
        return {"note": "a"}

    @node
    def b(state: S):
        return {"note": "b"}

    graph = Graph(S).flow(START >> fan_to("b", "a"), a >> END, b >> END)
    with pytest.raises(
        InvalidUpdateError, match="Field 'note' got writes from 'a', 'b' in step 1"
    ) as info:
        graph.invoke({})
    assert info.value.writers == ("a", "b")


@pytest.mark.anyio
async def test_sends_of_one_node_writing_different_values_to_a_plain_field_conflict():
    # They finish item 3, 2, 1: each waits for the next one.
    done = {item: anyio.Event() for item in (1, 2, 3)}

    @node
    async def worker(state: S):
        if state.item < 3:
            await done[state.item + 1].wait()
        done[state.item].set()
        return {"note": f"item {state.item}"}

    with pytest.raises(InvalidUpdateError, match="3 tasks of one node wrote different values"):
        await Graph(S).flow(START >> scattering_to(worker), worker >> END).ainvoke({})


# -- limits ---------------------------------------------------------------------------------


def test_more_supersteps_than_max_steps_raise_run_limit_exceeded():
    @node
    def loop(state: S):
        return {"count": state.count + 1}

    graph = Graph(S, name="spin", max_steps=3).flow(
        START >> loop, loop >> when(lambda s: True, loop, otherwise=END)
    )
    with pytest.raises(
        RunLimitExceededError,
        match=(
            "Graph 'spin' needed more than max_steps=3 supersteps in one call; "
            "it stopped before step 3"
        ),
    ) as info:
        graph.invoke({})
    assert info.value.max_steps == 3
    assert isinstance(info.value, GraphExecutionError)


def test_max_steps_counts_the_supersteps_of_each_call():
    @node
    def loop(state: S):
        return {"count": state.count + 1}

    graph = Graph(S, max_steps=2).flow(
        START >> loop, loop >> when(lambda s: s.count < 3, loop, otherwise=END)
    )
    store = InMemoryStateStore()
    with pytest.raises(RunLimitExceededError, match="stopped before step 2"):
        graph.invoke({}, thread_id="t", state_store=store)
    result = graph.invoke(None, thread_id="t", state_store=store)
    assert (result.status, result.state.count, result.step) == ("completed", 3, 2)


def test_a_calls_max_steps_lowers_or_raises_the_graphs_for_that_call_only():
    @node
    def loop(state: S):
        return {"count": state.count + 1}

    graph = Graph(S, name="spin", max_steps=3).flow(
        START >> loop, loop >> when(lambda s: s.count < 5, loop, otherwise=END)
    )
    with pytest.raises(RunLimitExceededError, match=r"=2 .* the call's max_steps=") as info:
        graph.invoke({}, max_steps=2)
    assert info.value.max_steps == 2
    assert graph.invoke({}, max_steps=5).state.count == 5
    with pytest.raises(RunLimitExceededError, match=r"max_steps=3 .* Graph\(max_steps=\.\.\.\)"):
        graph.invoke({})


@pytest.mark.parametrize("steps", [0, -1, 1.5, True, "3"])
def test_a_calls_max_steps_that_is_not_a_whole_number_above_0_is_refused(steps: Any) -> None:
    @node
    def noop(state: S):
        return {}

    graph = Graph(S).flow(START >> noop, noop >> END)
    with pytest.raises(GraphConfigError, match=r"invoke\(max_steps=\.\.\.\) takes a whole number"):
        graph.invoke({}, max_steps=steps)


def test_a_run_of_exactly_max_steps_completes():
    @node
    def loop(state: S):
        return {"count": state.count + 1}

    graph = Graph(S, max_steps=3).flow(
        START >> loop, loop >> when(lambda s: s.count < 3, loop, otherwise=END)
    )
    assert graph.invoke({}).state.count == 3


@pytest.mark.anyio
async def test_graph_timeout_raises_graph_timeout_error():
    @node
    async def slow(state: S):
        await anyio.sleep(2)  # real time: what the graph's timeout of 0.05 s must cut short
        return None

    graph = Graph(S, name="slowpoke", timeout=0.05).flow(START >> slow, slow >> END)
    with pytest.raises(
        GraphTimeoutError,
        match=(
            r"Graph 'slowpoke' spent more than timeout=0\.05s inside supersteps; "
            r"it stopped in step 0"
        ),
    ) as info:
        await graph.ainvoke({})
    assert isinstance(info.value, TimeoutError)


@pytest.mark.anyio
async def test_graph_timeout_stops_waiting_for_a_sync_node_still_running_in_its_thread():
    release = threading.Event()

    @node
    def stuck(state: S):
        release.wait(5)
        return None

    graph = Graph(S, timeout=0.05).flow(START >> stuck, stuck >> END)
    try:
        with pytest.raises(
            GraphTimeoutError, match=r"timeout=0\.05s inside supersteps; it stopped in step 0"
        ):
            await graph.ainvoke({})
        assert not release.is_set()  # raised while the node was still running
    finally:
        release.set()


@pytest.mark.anyio
async def test_graph_timeout_counts_time_across_supersteps():
    @node
    async def tick(state: S):
        await anyio.sleep(0.02)  # real time: what the graph's timeout adds up across supersteps
        return {"count": state.count + 1}

    graph = Graph(S, timeout=0.1).flow(
        START >> tick, tick >> when(lambda s: True, tick, otherwise=END)
    )
    with pytest.raises(
        GraphTimeoutError, match=r"timeout=0\.1s inside supersteps; it stopped in step [1-9]"
    ):
        await graph.ainvoke({})


@pytest.mark.slow
@pytest.mark.anyio
async def test_graph_timeout_does_not_count_time_spent_outside_supersteps():
    @node
    async def tick(state: S):
        return {"count": state.count + 1}

    graph = Graph(S, timeout=0.2).flow(
        START >> tick, tick >> when(lambda s: s.count < 2, tick, otherwise=END)
    )
    events = []
    async for event in graph.astream({}, stream_mode="updates"):
        events.append(event)
        await anyio.sleep(0.15)  # real time: the caller's, which the graph's timeout must not count
    assert events[-1].mode == "final"


@pytest.mark.anyio
async def test_async_node_timeout_cancels_the_node():
    cancelled: list[bool] = []

    @node(timeout=0.1)
    async def slow_lookup(state: S):
        try:
            await anyio.sleep(5)  # real time: what the node's timeout of 0.1 s must cancel
        except anyio.get_cancelled_exc_class():
            cancelled.append(True)
            raise
        return None

    graph = Graph(S).flow(START >> slow_lookup, slow_lookup >> END)
    with pytest.raises(
        NodeTimeoutError,
        match=r"^Node 'slow_lookup' timed out after 0\.1s; give it a longer",
    ) as info:
        await graph.ainvoke({})
    assert (info.value.node, info.value.timeout) == ("slow_lookup", 0.1)
    assert cancelled == [True]


@pytest.mark.anyio
async def test_sync_node_timeout_is_raised_after_its_thread_returns():
    finished: list[bool] = []

    @node(timeout=0.05)
    def slow_lookup(state: S):
        time.sleep(0.15)  # real time: a thread that runs past its node's timeout of 0.05 s
        finished.append(True)
        return {"count": 1}

    graph = Graph(S).flow(START >> slow_lookup, slow_lookup >> END)
    with pytest.raises(
        NodeTimeoutError,
        match=r"^Node 'slow_lookup' timed out after 0\.05s; give it a longer",
    ):
        await graph.ainvoke({})
    assert finished == [True]


@pytest.mark.anyio
async def test_node_within_its_timeout_completes():
    @node(timeout=5)
    async def quick(state: S):
        return {"count": 1}

    @node(timeout=5)
    def quick_sync(state: S):
        return {"note": "ok"}

    graph = Graph(S).flow(START >> quick, quick >> quick_sync, quick_sync >> END)
    assert (await graph.ainvoke({})).data["note"] == "ok"


# -- calling --------------------------------------------------------------------------------


@node
def bump(state: S):
    return {"count": state.count + 1}


BUMP = Graph(S).flow(START >> bump, bump >> END)


@pytest.mark.anyio
async def test_ainvoke_runs_in_async_code():
    result = await BUMP.ainvoke({"count": 1})
    assert result.state.count == 2


def test_thread_id_is_generated_and_unique_when_none_is_given():
    seen: list[str] = []

    @node
    def record(state: S, ctx: NodeContext):
        seen.append(ctx.thread_id)
        return None

    graph = Graph(S).flow(START >> record, record >> END)
    first, second = graph.invoke({}), graph.invoke({})
    assert first.thread_id != second.thread_id
    assert seen == [first.thread_id, second.thread_id]
    for thread_id in seen:
        assert len(thread_id) == 32
        int(thread_id, 16)


def test_a_thread_id_without_a_store_is_refused_saying_a_store_is_needed():
    # Without a store the run keeps nothing: the id would name a thread that never exists.
    def refused(method: str) -> str:
        return (
            f"{method}(thread_id='mine') names a thread to keep, but graph 'graph' has no "
            f"state store, so a run keeps nothing: the next call with that id would start "
            f"from the defaults again. A thread needs a store: pass state_store=... (e.g. "
            f"InMemoryStateStore()) to Graph(...) or to this call; or leave thread_id out "
            f"(the result gets a new id)."
        )

    async def astream() -> None:
        async for _ in BUMP.astream({}, thread_id="mine", stream_mode="values"):
            pass

    calls = {
        "invoke": lambda: BUMP.invoke({}, thread_id="mine"),
        "ainvoke": lambda: anyio.run(lambda: BUMP.ainvoke({}, thread_id="mine")),
        "stream": lambda: list(BUMP.stream({}, thread_id="mine", stream_mode="values")),
        "astream": lambda: anyio.run(astream),
    }
    for method, call in calls.items():
        with pytest.raises(GraphConfigError) as caught:
            call()
        assert str(caught.value) == refused(method)
    assert BUMP.invoke({}).thread_id != BUMP.invoke({}).thread_id  # no id: a new one each
    stored = BUMP.invoke({}, thread_id="mine", state_store=InMemoryStateStore())
    assert stored.thread_id == "mine"


def test_empty_thread_id_is_refused():
    with pytest.raises(GraphConfigError, match="thread_id must be a non-empty string"):
        BUMP.invoke({}, thread_id="")


def test_each_call_gets_its_own_run_id():
    assert BUMP.invoke({}).run_id != BUMP.invoke({}).run_id


@pytest.mark.anyio
async def test_a_graph_can_be_invoked_concurrently_from_async_code():
    started = 0
    all_started = anyio.Event()

    @node
    async def slow_bump(state: S):
        nonlocal started
        started += 1
        if started == 5:
            all_started.set()
        # Each run waits for the others: only possible if all five run at the same time.
        with anyio.fail_after(5):
            await all_started.wait()
        return {"count": state.count + 1}

    graph = Graph(S).flow(START >> slow_bump, slow_bump >> END)
    counts: dict[int, int] = {}

    async def call(i: int) -> None:
        counts[i] = (await graph.ainvoke({"count": i})).state.count

    async with anyio.create_task_group() as group:
        for i in range(5):
            group.start_soon(call, i)
    assert counts == {0: 1, 1: 2, 2: 3, 3: 4, 4: 5}


def test_input_may_use_replace_on_a_reducer_field():
    assert BUMP.invoke({"log": Replace(["x"])}).state.log == ["x"]


def test_a_state_instance_as_input_is_the_full_state():
    assert BUMP.invoke(S(count=4, note="n")).data["note"] == "n"


def test_none_input_without_a_store_is_refused_as_nothing_to_continue():
    with pytest.raises(GraphConfigError, match=r"^invoke\(None\) continues a stored thread"):
        BUMP.invoke()
    assert BUMP.invoke({}).state.count == 1


# -- where plain def nodes run ----------------------------------------------------------------


@pytest.mark.anyio
async def test_sync_nodes_of_one_superstep_run_concurrently_in_threads():
    barrier = threading.Barrier(2, timeout=5)
    threads: dict[str, int] = {}

    def make(name: str):
        def f(state: S):
            # Each waits for the other: only possible if both run at the same time.
            barrier.wait()
            threads[name] = threading.get_ident()
            return {"log": [name]}

        return node(f, name=name)

    a, b = make("a"), make("b")
    graph = Graph(S).flow(START >> fan_to("a", "b"), a >> END, b >> END)
    result = await graph.ainvoke({})
    assert result.state.log == ["a", "b"]
    assert threads["a"] != threads["b"]
    assert threading.get_ident() not in threads.values()


@pytest.mark.anyio
async def test_a_sync_node_does_not_stall_an_async_node_of_its_superstep():
    order: list[str] = []
    started = threading.Event()

    ran = threading.Event()

    @node
    def blocking(state: S):
        started.set()
        # Wait until the async task ran: impossible if this blocked the event loop.
        ran.wait(5)
        order.append("sync")
        return None

    @node
    async def nonblocking(state: S):
        await anyio.to_thread.run_sync(started.wait, 5)
        order.append("async")
        ran.set()
        return None

    graph = Graph(S).flow(
        START >> fan_to("blocking", "nonblocking"), blocking >> END, nonblocking >> END
    )
    await graph.ainvoke({})
    assert order == ["async", "sync"]


@pytest.mark.anyio
async def test_a_lone_sync_node_runs_inline_on_the_loop_thread():
    idents: list[int] = []

    @node
    def lone(state: S):
        idents.append(threading.get_ident())
        return None

    graph = Graph(S).flow(START >> lone, lone >> END)
    await graph.ainvoke({})
    assert idents == [threading.get_ident()]


@pytest.mark.anyio
async def test_a_lone_sync_node_with_a_timeout_runs_in_a_worker_thread():
    idents: list[int] = []

    @node(timeout=5)
    def lone(state: S):
        idents.append(threading.get_ident())
        return None

    await Graph(S).flow(START >> lone, lone >> END).ainvoke({})
    assert len(idents) == 1 and idents != [threading.get_ident()]


@pytest.mark.anyio
async def test_a_lone_sync_node_of_a_graph_with_a_timeout_runs_in_a_worker_thread():
    idents: list[int] = []

    @node
    def lone(state: S):
        idents.append(threading.get_ident())
        return None

    await Graph(S, timeout=5).flow(START >> lone, lone >> END).ainvoke({})
    assert len(idents) == 1 and idents != [threading.get_ident()]


def test_context_is_passed_to_every_node_of_the_run():
    seen: list[Any] = []
    shared = {"client": object()}

    @node
    def a(state: S, ctx: NodeContext):
        seen.append(ctx.context)
        return None

    @node
    async def b(ctx: NodeContext, state: S):
        seen.append(ctx.context)
        return None

    Graph(S).flow(START >> a, a >> b, b >> END).invoke({}, context=shared)
    assert seen == [shared, shared]
    assert all(c is shared for c in seen)
