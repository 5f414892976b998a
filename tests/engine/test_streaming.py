"""Streaming: the events of each mode, their order, the terminal event, and closing early."""

from __future__ import annotations

import gc
import re
import threading
import time
import warnings
from typing import Annotated, Any

import anyio
import pytest
from pydantic import Field, PlainSerializer

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    FinalEventData,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    NodeContext,
    Send,
    StreamEvent,
    add,
    node,
)


class S(BaseState):
    count: int = 0
    item: int = 0
    log: Annotated[list[str], add] = Field(default_factory=list)


@node
def first(state: S):
    return {"count": state.count + 1, "log": ["first"]}


@node
def second(state: S):
    return None


LINE = Graph(S, name="line").flow(START >> first, first >> second, second >> END)


B_DONE: dict[str, anyio.Event] = {}
"""Set once b has finished: a waits for it. ``fan`` makes a new one for each run."""


@node(goto=["b", "a"])
def fan(state: S):
    B_DONE["b"] = anyio.Event()
    return Command(goto=["b", "a"])


@node
async def a(state: S, ctx: NodeContext):
    await B_DONE["b"].wait()  # finishes after b
    ctx.emit({"from": "a"})
    return {"log": ["a"]}


@node
async def b(state: S, ctx: NodeContext):
    ctx.emit({"from": "b"})
    B_DONE["b"].set()
    return None


FAN = Graph(S, name="fan").flow(START >> fan, a >> END, b >> END)


def _shape(events: list[StreamEvent]) -> list[tuple[Any, ...]]:
    return [(e.mode, e.step, e.task_id, e.data) for e in events if e.mode != "final"]


def test_updates_mode_yields_one_event_per_task_with_its_update_or_none():
    events = list(LINE.stream({}, stream_mode="updates"))
    assert _shape(events) == [
        ("updates", 0, "first", {"count": 1, "log": ["first"]}),
        ("updates", 1, "second", None),
    ]
    assert [e.node for e in events] == ["first", "second", None]
    assert events[-1].mode == "final"


@pytest.mark.anyio
async def test_updates_events_come_in_scheduling_order_not_finishing_order():
    events = [e async for e in FAN.astream({}, stream_mode="updates")]
    assert [(e.step, e.task_id, e.data) for e in events if e.mode == "updates"] == [
        (0, "fan", None),
        (1, "a", {"log": ["a"]}),
        (1, "b", None),
    ]


@pytest.mark.anyio
async def test_updates_events_name_each_send_task():
    second_done = anyio.Event()  # item 2 finishes first

    @node(goto=["worker"])
    def scatter(state: S):
        return Command(goto=[Send(worker, {"item": i}) for i in (1, 2)])

    @node
    async def worker(state: S):
        if state.item == 1:
            await second_done.wait()
        else:
            second_done.set()
        return {"log": [str(state.item)]}

    graph = Graph(S).flow(START >> scatter, worker >> END)
    stream = graph.astream({}, stream_mode="updates")
    events = [e async for e in stream if e.mode == "updates"][1:]
    assert [(e.node, e.task_id, e.data) for e in events] == [
        ("worker", "worker", {"log": ["1"]}),
        ("worker", "worker[1]", {"log": ["2"]}),
    ]


def test_values_mode_yields_the_merged_state_after_each_superstep():
    events = list(LINE.stream({"count": 5}, stream_mode="values"))
    assert _shape(events) == [
        ("values", 0, None, {"count": 6, "item": 0, "log": ["first"]}),
        ("values", 1, None, {"count": 6, "item": 0, "log": ["first"]}),
    ]


@pytest.mark.anyio
async def test_values_mode_shows_the_writes_of_every_task_of_the_superstep():
    events = [e async for e in FAN.astream({}, stream_mode="values") if e.step == 1]
    assert events[0].data["log"] == ["a"]


def test_event_data_is_a_copy_the_caller_may_change():
    for event in LINE.stream({}, stream_mode=["updates", "values"]):
        if event.mode in ("updates", "values") and event.data:
            event.data["log"].append("meddled")
        if event.mode == "final":
            assert event.data.state.log == ["first"]


def test_several_modes_interleave_per_superstep_updates_then_values():
    events = list(LINE.stream({}, stream_mode=["values", "updates"]))
    assert [(e.mode, e.step) for e in events] == [
        ("updates", 0),
        ("values", 0),
        ("updates", 1),
        ("values", 1),
        ("final", 1),
    ]


@pytest.mark.anyio
async def test_custom_mode_yields_what_nodes_emit_during_the_superstep():
    events = [e async for e in FAN.astream({}, stream_mode="custom")]
    assert [(e.mode, e.node, e.task_id, e.step, e.data) for e in events] == [
        ("custom", "b", "b", 1, {"from": "b"}),
        ("custom", "a", "a", 1, {"from": "a"}),
        ("final", None, None, 1, events[-1].data),
    ]


@pytest.mark.anyio
async def test_custom_events_come_before_the_updates_of_their_superstep():
    events = [e async for e in FAN.astream({}, stream_mode=["updates", "custom"])]
    assert [(e.mode, e.step, e.task_id) for e in events] == [
        ("updates", 0, "fan"),
        ("custom", 1, "b"),
        ("custom", 1, "a"),
        ("updates", 1, "a"),
        ("updates", 1, "b"),
        ("final", 1, None),
    ]


@pytest.mark.anyio
async def test_custom_events_from_a_sync_node_in_a_worker_thread_arrive():
    @node
    def chatty(state: S, ctx: NodeContext):
        ctx.emit("one")
        ctx.emit("two")
        return None

    graph = Graph(S).flow(START >> chatty, chatty >> END)
    assert [
        e.data async for e in graph.astream({}, stream_mode="custom") if e.mode == "custom"
    ] == [
        "one",
        "two",
    ]


def test_debug_mode_shows_node_input_node_output_routes_and_state_merge():
    events = [e for e in LINE.stream({"count": 1}, stream_mode="debug") if e.mode == "debug"]
    assert [(e.step, e.task_id, e.data) for e in events] == [
        (0, "first", {"type": "node_input", "state": {"count": 1, "item": 0, "log": []}}),
        (0, "first", {"type": "node_output", "update": {"count": 2, "log": ["first"]}}),
        (0, None, {"type": "routes", "routes": {"first": ["second"]}}),
        (0, None, {"type": "state_merge", "state": {"count": 2, "item": 0, "log": ["first"]}}),
        (1, "second", {"type": "node_input", "state": {"count": 2, "item": 0, "log": ["first"]}}),
        (1, "second", {"type": "node_output", "update": {}}),
        (1, None, {"type": "routes", "routes": {"second": []}}),
        (1, None, {"type": "state_merge", "state": {"count": 2, "item": 0, "log": ["first"]}}),
    ]


Masked = Annotated[str, PlainSerializer(lambda token: "***", return_type=str)]


class Login(BaseState):
    token: Masked = ""
    tries: Annotated[int, PlainSerializer(lambda n: f"{n} tries", return_type=str)] = 0


def test_every_debug_event_dumps_the_state_by_its_fields_serializers():
    # node_input always went through model_dump; the other events showed the raw values.
    @node(goto=["check"])
    def login(state: Login):
        return Send(check, {"token": "t-send", "tries": 1})

    @node
    def check(state: Login):
        return {"token": "t-new", "tries": state.tries + 1}

    graph = Graph(Login).flow(START >> login, check >> END)
    events = [e.data for e in graph.stream({"token": "t-in"}, stream_mode="debug")]
    assert events[:-1] == [
        {"type": "node_input", "state": {"token": "***", "tries": "0 tries"}},
        {"type": "node_output", "update": {}},
        {
            "type": "routes",
            "routes": {
                "login": [{"send": "check", "payload": {"token": "***", "tries": "1 tries"}}]
            },
        },
        {"type": "state_merge", "state": {"token": "***", "tries": "0 tries"}},
        {"type": "node_input", "state": {"token": "***", "tries": "1 tries"}},
        {"type": "node_output", "update": {"token": "***", "tries": "2 tries"}},
        {"type": "routes", "routes": {"check": []}},
        {"type": "state_merge", "state": {"token": "***", "tries": "2 tries"}},
    ]
    assert "t-" not in repr(events[:-1])


@pytest.mark.anyio
async def test_debug_routes_show_sends_and_gotos():
    events = [
        e
        async for e in FAN.astream({}, stream_mode="debug")
        if e.mode == "debug" and e.data["type"] == "routes"
    ]
    assert events[0].data == {"type": "routes", "routes": {"fan": ["b", "a"]}}

    @node(goto=["worker"])
    def scatter(state: S):
        return Send(worker, {"item": 1})

    @node
    def worker(state: S):
        return None

    graph = Graph(S).flow(START >> scatter, worker >> END)
    routes = [
        e.data["routes"]
        async for e in graph.astream({}, stream_mode="debug")
        if e.mode == "debug" and e.data["type"] == "routes"
    ]
    assert routes == [{"scatter": [{"send": "worker", "payload": {"item": 1}}]}, {"worker": []}]


@pytest.mark.anyio
async def test_every_stream_ends_with_exactly_one_final_event():
    for modes in ("updates", "values", "custom", "debug", ["updates", "values", "custom", "debug"]):
        events = [e async for e in FAN.astream({}, stream_mode=modes)]
        assert [e.mode for e in events].count("final") == 1
        assert events[-1].mode == "final"


def test_final_event_carries_the_state_as_the_declared_type_and_the_thread():
    store = InMemoryStateStore()
    events = list(LINE.stream({}, stream_mode="updates", thread_id="thread-9", state_store=store))
    final = events[-1]
    assert isinstance(final.data, FinalEventData)
    assert type(final.data.state) is S
    assert final.data.state.count == 1
    assert final.data.thread_id == "thread-9"
    assert final.step == 1


def test_empty_stream_mode_yields_only_the_terminal_event():
    events = list(LINE.stream({}, stream_mode=[]))
    assert [e.mode for e in events] == ["final"]


def test_stream_mode_is_required():
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'stream_mode'"):
        LINE.stream({})  # type: ignore[call-arg]


@pytest.mark.parametrize("given", [None, 7, {"updates": True}])
def test_a_stream_mode_that_is_no_name_or_list_is_a_config_error(given: Any):
    with pytest.raises(
        GraphConfigError, match=rf"^stream_mode is required .*, got {re.escape(repr(given))}; "
    ):
        LINE.stream({}, stream_mode=given)


@pytest.mark.anyio
async def test_astream_with_stream_mode_none_is_a_config_error_not_a_type_error():
    with pytest.raises(GraphConfigError, match=r"got None; pass one of 'updates'"):
        LINE.astream({}, stream_mode=None)  # type: ignore[arg-type]


def test_unknown_stream_mode_is_a_config_error_listing_the_known_ones():
    with pytest.raises(
        GraphConfigError,
        match="Unknown stream_mode 'tokens'; use 'updates', 'values', 'custom', 'debug', "
        "'messages', 'task_updates' or a",
    ):
        LINE.stream({}, stream_mode=["updates", "tokens"])


@pytest.mark.parametrize(
    ("mode", "hint"),
    [
        ("tasks", "LangGraph's 'tasks' mode: 'task_updates' sends each task's update"),
        ("checkpoints", "LangGraph's 'checkpoints' mode: stream 'values'"),
    ],
)
def test_a_langgraph_stream_mode_is_a_config_error_naming_what_to_use(mode: str, hint: str):
    with pytest.raises(GraphConfigError, match=re.escape(hint)):
        LINE.stream({}, stream_mode=["updates", mode])


def test_unpacking_an_event_as_langgraphs_tuple_says_to_read_its_fields():
    with pytest.raises(TypeError, match=r"cannot be unpacked: .* read event\.mode, event\.node"):
        for _mode, _data in LINE.stream({}, stream_mode=["updates", "values"]):
            pass


def test_an_event_read_as_langgraphs_update_dict_says_to_read_its_fields():
    event = next(iter(LINE.stream({}, stream_mode="updates")))
    with pytest.raises(TypeError, match=r"not subscriptable .* \{node: update\} dicts"):
        event["first"]


@pytest.mark.anyio
async def test_unknown_stream_mode_in_astream_is_a_config_error():
    with pytest.raises(GraphConfigError, match="Unknown stream_mode 'everything'"):
        async for _ in LINE.astream({}, stream_mode="everything"):
            pass


@pytest.mark.anyio
async def test_every_event_carries_the_run_id_and_no_checkpoint_without_a_store():
    modes = ["updates", "values", "custom", "debug"]
    events = [e async for e in FAN.astream({}, stream_mode=modes)]
    run_ids = {e.run_id for e in events}
    assert len(run_ids) == 1
    (run_id,) = run_ids
    assert len(run_id) == 32
    assert {e.checkpoint_id for e in events} == {None}


@pytest.mark.anyio
async def test_events_carry_the_history_event_to_load_their_state_at_with_a_store():
    store = InMemoryStateStore()
    stream = LINE.astream({}, stream_mode="updates", thread_id="t", state_store=store)
    events = [e async for e in stream]
    ids = [e.checkpoint_id for e in events]
    assert all(isinstance(i, str) for i in ids)
    assert ids[0] != ids[1]
    history = await LINE.history("t", state_store=store)
    stored = [e.id for e in history.events]
    assert ids[0] in stored
    assert ids[-1] == stored[-1]


def test_events_sent_while_a_task_runs_name_no_checkpoint_even_with_a_store():
    @node
    def talk(state: S, ctx: NodeContext):
        ctx.emit("custom")
        ctx.emit("token", mode="messages")
        return {"count": 1}

    graph = Graph(S, state_store=InMemoryStateStore()).flow(START >> talk, talk >> END)
    modes = ["custom", "messages", "task_updates", "debug", "updates"]
    events = list(graph.stream({}, stream_mode=modes, thread_id="t"))
    kinds = [(e.data["type"] if e.mode == "debug" else e.mode, e.checkpoint_id) for e in events]
    without = {kind for kind, checkpoint in kinds if checkpoint is None}
    with_one = {kind for kind, checkpoint in kinds if isinstance(checkpoint, str)}
    assert without == {"custom", "messages", "task_updates", "node_input", "node_output"}
    assert with_one == {"updates", "routes", "state_merge", "final"}


def test_closing_a_stream_early_stops_the_run():
    ran: list[str] = []

    @node
    def one(state: S):
        ran.append("one")
        return {"count": 1}

    @node
    def two(state: S):
        ran.append("two")
        return None

    graph = Graph(S).flow(START >> one, one >> two, two >> END)
    stream = graph.stream({}, stream_mode="updates")
    first_event = next(stream)
    stream.close()
    assert first_event.task_id == "one"
    assert ran == ["one"]


def test_breaking_out_of_a_stream_stops_the_run():
    ran: list[str] = []

    @node
    def one(state: S):
        ran.append("one")
        return None

    @node
    def two(state: S):
        ran.append("two")
        return None

    graph = Graph(S).flow(START >> one, one >> two, two >> END)
    for _event in graph.stream({}, stream_mode="updates"):
        break
    assert ran == ["one"]


@pytest.mark.parametrize("method", ["stream", "astream"])
def test_a_stream_dropped_before_its_first_event_warns_of_nothing(method: str):
    @node
    def one(state: S):
        return None

    graph = Graph(S).flow(START >> one, one >> END)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stream = getattr(graph, method)({}, stream_mode="updates")
        del stream
        gc.collect()
    assert [str(w.message) for w in caught] == []


def test_closing_a_stream_during_a_superstep_cancels_its_running_tasks():
    cancelled: list[str] = []
    ran: list[str] = []

    @node(goto=["talker", "sleeper"])
    def start(state: S):
        return Command(goto=["talker", "sleeper"])

    @node
    async def talker(state: S, ctx: NodeContext):
        ctx.emit("hello")
        return None

    @node
    async def sleeper(state: S):
        try:
            await anyio.sleep(5)  # held until the stream closes; 5 s bounds a close that does not
        except anyio.get_cancelled_exc_class():
            cancelled.append("sleeper")
            raise
        return None

    @node
    def later(state: S):
        ran.append("later")
        return None

    graph = Graph(S).flow(START >> start, talker >> later, sleeper >> later, later >> END)
    for event in graph.stream({}, stream_mode="custom"):
        assert event.data == "hello"
        break
    assert cancelled == ["sleeper"]
    assert ran == []


def test_closing_a_stream_during_a_superstep_of_sync_nodes_runs_no_later_node():
    release = threading.Event()
    ran: list[str] = []

    @node(goto=["talker", "waiter"])
    def start(state: S):
        return Command(goto=["talker", "waiter"])

    @node
    def talker(state: S, ctx: NodeContext):
        ctx.emit("hello")
        return None

    @node
    def waiter(state: S):
        release.wait(5)
        return None

    @node
    def later(state: S):
        ran.append("later")
        return None

    graph = Graph(S).flow(START >> start, talker >> later, waiter >> later, later >> END)
    try:
        for event in graph.stream({}, stream_mode="custom"):
            assert event.data == "hello"
            break
    finally:
        release.set()
    time.sleep(0.02)  # real time: a grace in which a run still alive would start `later`
    assert ran == []


@pytest.mark.anyio
async def test_astream_yields_events_in_async_code():
    events = [(e.mode, e.task_id) async for e in LINE.astream({}, stream_mode="updates")]
    assert events == [("updates", "first"), ("updates", "second"), ("final", None)]


@pytest.mark.anyio
async def test_closing_an_astream_early_stops_the_run():
    ran: list[str] = []

    @node
    async def one(state: S):
        ran.append("one")
        return None

    @node
    async def two(state: S):
        ran.append("two")
        return None

    graph = Graph(S).flow(START >> one, one >> two, two >> END)
    stream = graph.astream({}, stream_mode="updates")
    await stream.__anext__()
    await stream.aclose()
    assert ran == ["one"]


def test_a_failing_node_ends_the_stream_with_its_error_after_earlier_events():
    @node
    def boom(state: S):
        raise LookupError("no such thing")

    graph = Graph(S).flow(START >> first, first >> boom, boom >> END)
    seen = []
    with pytest.raises(LookupError, match="no such thing"):
        for event in graph.stream({}, stream_mode="updates"):
            seen.append(event.task_id)
    assert seen == ["first"]


def _sleeper_graph(store: InMemoryStateStore, cleaned: list[str]) -> Graph[S]:
    @node
    async def sleeper(state: S, ctx: NodeContext):
        ctx.emit("started")
        try:
            await anyio.sleep(30)  # held until the stream closes; 30 s bounds one that does not
        finally:
            # Cleanup that takes time of its own, shielded as it must be on trio.
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.02)  # real time: how long the cleanup takes; aclose waits
            cleaned.append("sleeper")
        return None

    return Graph(S, state_store=store).flow(START >> sleeper, sleeper >> END)


@pytest.mark.anyio
async def test_aclose_returns_after_the_running_node_is_cancelled_and_run_stopped_is_stored():
    store, cleaned = InMemoryStateStore(), []
    graph = _sleeper_graph(store, cleaned)
    stream = graph.astream({}, thread_id="t", stream_mode="custom")
    assert (await stream.__anext__()).data == "started"
    await stream.aclose()
    assert cleaned == ["sleeper"]
    last = (await graph.history("t")).events[-1]
    assert (last.type, last.data["reason"]) == ("run_stopped", "stream_closed")
    assert (await graph.get_state("t")).next == ("sleeper",)


def test_closing_a_sync_stream_returns_after_the_running_node_is_cancelled():
    store, cleaned = InMemoryStateStore(), []
    graph = _sleeper_graph(store, cleaned)
    stream = graph.stream({}, thread_id="t", stream_mode="custom")
    assert next(stream).data == "started"
    stream.close()
    assert cleaned == ["sleeper"]
    last = graph.history_sync("t").events[-1]
    assert (last.type, last.data["reason"]) == ("run_stopped", "stream_closed")
