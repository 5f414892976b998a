"""The node cache: ``@node(cache=CachePolicy(...))`` reuses a node's result for the same input."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    CachePolicy,
    Command,
    FilesystemStateStore,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    Send,
    StateStoreError,
    add,
    interrupt,
    node,
)
from nodestep.store import StateStore
from nodestep.testing import sequential_ids, ticking_clock
from store_helpers import open_file


class Trip(BaseState):
    city: str = ""
    day: int = 0
    report: str = ""
    notes: Annotated[list[str], add] = Field(default_factory=list)


def weather_graph(
    calls: Counter[str],
    policy: CachePolicy,
    *,
    store: StateStore | None = None,
    cache_store: StateStore | None = None,
    clock: Any = None,
) -> Graph[Trip]:
    @node(cache=policy)
    def weather(state: Trip) -> dict:
        calls["weather"] += 1
        return {"report": f"sun in {state.city} on day {state.day}", "notes": ["looked"]}

    graph = Graph(
        Trip,
        state_store=store,
        cache_store=cache_store,
        clock=clock or ticking_clock(),
        id_factory=sequential_ids(),
    )
    return graph.flow(START >> weather, weather >> END)


def test_a_hit_runs_no_node_code_and_gives_the_stored_update() -> None:
    calls: Counter[str] = Counter()
    graph = weather_graph(calls, CachePolicy(), store=InMemoryStateStore())
    first = graph.invoke({"city": "Oslo"}, thread_id="a").state
    second = graph.invoke({"city": "Oslo"}, thread_id="b").state
    assert calls["weather"] == 1
    assert second == first
    assert second.notes == ["looked"]


def test_a_hit_calls_no_node_hooks_and_the_run_hooks_still_run() -> None:
    from nodestep import Middleware
    from nodestep.middleware import GraphMiddlewareContext, NodeMiddlewareContext

    seen: list[str] = []

    class Audit(Middleware):
        def before_graph(self, ctx: GraphMiddlewareContext) -> None:
            seen.append("before_graph")

        def before_node(self, ctx: NodeMiddlewareContext) -> None:
            seen.append(f"before_node {ctx.node_name}")

        def after_node(self, ctx: NodeMiddlewareContext) -> None:
            seen.append(f"after_node {ctx.node_name}")

    @node(cache=CachePolicy())
    def weather(state: Trip) -> dict:
        return {"report": f"sun in {state.city}"}

    graph = Graph(Trip, middleware=[Audit()]).flow(START >> weather, weather >> END)
    graph.invoke({"city": "Oslo"})
    assert seen == ["before_graph", "before_node weather", "after_node weather"]
    seen.clear()
    assert graph.invoke({"city": "Oslo"}).state.report == "sun in Oslo"
    assert seen == ["before_graph"]


def test_a_hit_is_marked_cached_in_history_and_a_miss_is_not() -> None:
    graph = weather_graph(Counter(), CachePolicy(), store=InMemoryStateStore())
    graph.invoke({"city": "Oslo"}, thread_id="a")
    graph.invoke({"city": "Oslo"}, thread_id="b")

    def task_entry(thread: str) -> dict:
        events = graph.history_sync(thread).events
        step = next(e for e in events if e.type == "superstep_completed")
        return step.data["tasks"]["weather"]

    assert "cached" not in task_entry("a")
    assert task_entry("b")["cached"] is True
    assert task_entry("b")["update"] == task_entry("a")["update"]


def test_the_default_key_is_the_whole_input() -> None:
    calls: Counter[str] = Counter()
    graph = weather_graph(calls, CachePolicy())
    graph.invoke({"city": "Oslo", "day": 1})
    graph.invoke({"city": "Oslo", "day": 2})
    graph.invoke({"city": "Oslo", "day": 1})
    assert calls["weather"] == 2


def test_a_key_function_names_what_the_result_depends_on() -> None:
    calls: Counter[str] = Counter()
    graph = weather_graph(calls, CachePolicy(key=lambda state: state.city))
    assert graph.invoke({"city": "Oslo", "day": 1}).state.report == "sun in Oslo on day 1"
    assert graph.invoke({"city": "Oslo", "day": 2}).state.report == "sun in Oslo on day 1"
    assert graph.invoke({"city": "Rome", "day": 2}).state.report == "sun in Rome on day 2"
    assert calls["weather"] == 2


def test_an_entry_expires_after_its_ttl_on_the_graph_clock() -> None:
    now = [1_000.0]
    calls: Counter[str] = Counter()
    graph = weather_graph(calls, CachePolicy(ttl=60), clock=lambda: now[0])
    graph.invoke({"city": "Oslo"})
    now[0] += 59.5
    graph.invoke({"city": "Oslo"})
    assert calls["weather"] == 1
    now[0] += 0.5  # 60 s after the entry was stored: expired
    graph.invoke({"city": "Oslo"})
    assert calls["weather"] == 2
    now[0] += 30  # the new entry is good for 60 s from its own store
    graph.invoke({"city": "Oslo"})
    assert calls["weather"] == 2


@pytest.mark.parametrize(("ttl", "runs"), [(0.5, 3), (3_600, 1), (None, 1)])
def test_ttl_on_a_ticking_clock(ttl: float | None, runs: int) -> None:
    calls: Counter[str] = Counter()
    graph = weather_graph(calls, CachePolicy(ttl=ttl), clock=ticking_clock(step=1.0))
    for _ in range(3):
        graph.invoke({"city": "Oslo"})
    assert calls["weather"] == runs


def test_entries_live_in_a_file_store_and_serve_another_graph_on_the_same_file(
    tmp_path: Path,
) -> None:
    calls: Counter[str] = Counter()
    path = tmp_path / "cache.jsonl"
    weather_graph(calls, CachePolicy(), cache_store=open_file(path)).invoke({"city": "Oslo"})
    again = weather_graph(calls, CachePolicy(), cache_store=open_file(path))
    assert again.invoke({"city": "Oslo"}).state.report == "sun in Oslo on day 0"
    assert calls["weather"] == 1


def test_the_graphs_own_store_can_keep_the_entries_beside_its_threads(store: StateStore) -> None:
    calls: Counter[str] = Counter()
    graph = weather_graph(calls, CachePolicy(), store=store, cache_store=store)
    graph.invoke({"city": "Oslo"}, thread_id="a")
    graph.invoke({"city": "Oslo"}, thread_id="b")
    assert calls["weather"] == 1
    assert graph.get_state_sync("b").value.report == "sun in Oslo on day 0"
    assert [e.type for e in graph.history_sync("b").events][-1] == "run_completed"


def test_the_cache_belongs_to_the_graph_by_default() -> None:
    calls: Counter[str] = Counter()
    weather_graph(calls, CachePolicy()).invoke({"city": "Oslo"})
    weather_graph(calls, CachePolicy()).invoke({"city": "Oslo"})
    assert calls["weather"] == 2


def test_a_hit_in_a_superstep_of_several_tasks_is_recorded_cached_and_others_run() -> None:
    calls: Counter[str] = Counter()

    @node(cache=CachePolicy(key=lambda state: state.city))
    def lookup(state: Trip) -> dict:
        calls["lookup"] += 1
        return {"report": state.city.upper()}

    @node
    def note(state: Trip) -> dict:
        calls["note"] += 1
        return {"notes": ["noted"]}

    @node(goto=[lookup, note])
    def fan(state: Trip) -> Command:
        return Command(goto=[lookup, note])

    store = InMemoryStateStore()
    graph = Graph(Trip, state_store=store).flow(START >> fan, lookup >> END, note >> END)
    graph.invoke({"city": "oslo"}, thread_id="a")
    state = graph.invoke({"city": "oslo"}, thread_id="b").state
    assert (state.report, state.notes) == ("OSLO", ["noted"])
    assert calls == Counter(lookup=1, note=2)
    finished = [e.data for e in graph.history_sync("b").events if e.type == "task_finished"]
    assert {d["node"]: d.get("cached", False) for d in finished} == {"lookup": True, "note": False}


def test_send_tasks_are_keyed_by_their_payload_and_cached_routes_keep_their_payload() -> None:
    calls: Counter[str] = Counter()

    @node(cache=CachePolicy())
    def visit(state: Trip) -> dict:
        calls[state.city] += 1
        return {"notes": [state.city]}

    @node(goto=[visit], cache=CachePolicy())
    def plan(state: Trip) -> Command:
        calls["plan"] += 1
        return Command(goto=[Send(visit, {"city": c}) for c in ("Oslo", "Rome")])

    graph = Graph(Trip).flow(START >> plan, visit >> END)
    first = graph.invoke({"day": 1}).state
    second = graph.invoke({"day": 1}).state
    assert first.notes == second.notes == ["Oslo", "Rome"]
    assert calls == Counter(plan=1, Oslo=1, Rome=1)


def test_a_key_function_that_raises_fails_the_task_as_the_node_would(store: StateStore) -> None:
    def broken(state: Trip) -> str:
        raise KeyError("no city")

    calls: Counter[str] = Counter()
    graph = weather_graph(calls, CachePolicy(key=broken), store=store)
    with pytest.raises(KeyError, match="no city"):
        graph.invoke({"city": "Oslo"}, thread_id="a")
    assert calls["weather"] == 0
    failed = graph.history_sync("a").events[-1]
    assert (failed.type, failed.data["node"], failed.data["error"]) == (
        "run_failed",
        "weather",
        "KeyError",
    )


def test_a_key_without_a_json_form_is_refused_naming_the_node() -> None:
    graph = weather_graph(Counter(), CachePolicy(key=lambda state: object()))
    with pytest.raises(StateStoreError, match="cache key of node 'weather'"):
        graph.invoke({"city": "Oslo"})


def test_time_travel_and_forks_read_the_recorded_update_not_the_cache() -> None:
    calls: Counter[str] = Counter()
    store = InMemoryStateStore()
    graph = weather_graph(calls, CachePolicy(ttl=0.5), store=store, clock=ticking_clock())
    graph.invoke({"city": "Oslo"}, thread_id="t")
    graph.invoke({"city": "Oslo"}, thread_id="t")  # expired: runs again, adds a note
    events = graph.history_sync("t").events
    first_turn = next(e for e in events if e.type == "run_completed")
    at_first = graph.load_sync("t", at=first_turn.id)
    assert at_first["notes"] == ["looked"]
    branch = graph.fork_sync("t", from_=first_turn.id, name="again")
    assert graph.get_state_sync("t", branch_id="again").value.notes == ["looked"]
    assert graph.get_state_sync("t").value.notes == ["looked", "looked"]
    assert branch.id == "again"


def test_a_thread_with_hits_loads_from_its_file_as_it_ran(tmp_path: Path) -> None:
    calls: Counter[str] = Counter()
    path = tmp_path / "threads.jsonl"
    policy = CachePolicy(key=lambda state: state.city)
    graph = weather_graph(calls, policy, store=open_file(path))
    for _ in range(3):
        live = graph.invoke({"city": "Oslo"}, thread_id="t").state
    reopened = weather_graph(calls, policy, store=open_file(path))
    assert reopened.get_state_sync("t").value == live
    assert live.notes == ["looked"] * 3
    assert calls["weather"] == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ttl": 0}, "positive number of seconds"),
        ({"ttl": float("nan")}, "positive number of seconds"),
        ({"ttl": True}, "positive number of seconds"),
        ({"key": "city"}, "function of the state"),
    ],
)
def test_a_bad_policy_is_refused_with_the_fix(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(TypeError, match=match):
        CachePolicy(**kwargs)


def test_cache_takes_only_a_policy_and_cache_store_only_a_store() -> None:
    with pytest.raises(TypeError, match=r"takes a CachePolicy, got 60.*CachePolicy\(ttl=60\)"):
        node(lambda state: {}, name="n", cache=60)  # type: ignore[call-overload]
    with pytest.raises(GraphConfigError, match="cache_store must be a StateStore, got str"):
        Graph(Trip, cache_store="cache.jsonl")  # type: ignore[arg-type]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["Oslo", "Rome"]), st.integers(0, 2)), max_size=6))
def test_a_cached_graph_ends_in_the_same_states_as_an_uncached_one(
    inputs: list[tuple[str, int]],
) -> None:
    cached = weather_graph(Counter(), CachePolicy(key=lambda s: (s.city, s.day)))
    plain = Graph(Trip).flow(START >> (n := _plain_weather()), n >> END)
    for city, day in inputs:
        patch = {"city": city, "day": day}
        assert cached.invoke(patch).state == plain.invoke(patch).state


def _plain_weather() -> Any:
    @node(name="weather")
    def weather(state: Trip) -> dict:
        return {"report": f"sun in {state.city} on day {state.day}", "notes": ["looked"]}

    return weather


def test_a_task_resumed_with_answers_is_not_stored_so_the_next_run_asks_again() -> None:
    calls: Counter[str] = Counter()

    @node(cache=CachePolicy(key=lambda state: state.city))
    def confirm(state: Trip) -> dict:
        calls["confirm"] += 1
        return {"report": str(interrupt(f"go to {state.city}?", id="go"))}

    graph = Graph(Trip, state_store=InMemoryStateStore()).flow(START >> confirm, confirm >> END)
    for thread, answer in (("a", "yes"), ("b", "no")):
        assert graph.invoke({"city": "Oslo"}, thread_id=thread).status == "interrupted"
        done = graph.invoke(Command(resume=answer), thread_id=thread)
        assert done.state.report == answer
    assert calls["confirm"] == 4


def test_a_hit_shows_in_the_debug_stream_as_the_nodes_output() -> None:
    graph = weather_graph(Counter(), CachePolicy())
    shown = []
    for _ in range(2):
        events = graph.stream({"city": "Oslo"}, stream_mode="debug")
        shown.append([e.data for e in events if e.mode == "debug" and e.node == "weather"])
    ran, hit = shown
    assert [d["type"] for d in ran] == ["node_input", "node_output"]
    assert hit == [ran[1]]  # nothing ran, so there is no input to show


def test_a_cache_store_that_cannot_write_fails_the_run_and_records_why(tmp_path: Path) -> None:
    path = tmp_path / "cache.jsonl"
    open_file(path)  # creates the file with its header
    read_only = FilesystemStateStore(path, read_only=True)
    store = InMemoryStateStore()
    graph = weather_graph(Counter(), CachePolicy(), store=store, cache_store=read_only)
    with pytest.raises(StateStoreError, match="opened with read_only=True"):
        graph.invoke({"city": "Oslo"}, thread_id="t")
    failed = graph.history_sync("t").events[-1]
    assert (failed.type, failed.data["error"]) == ("run_failed", "StateStoreError")


def test_a_result_without_a_json_form_fails_a_run_without_a_store_too() -> None:
    class Box(BaseState):
        thing: Any = None

    @node(cache=CachePolicy())
    def make(state: Box) -> dict:
        return {"thing": object()}

    graph = Graph(Box).flow(START >> make, make >> END)
    with pytest.raises(StateStoreError, match="cannot be stored as JSON"):
        graph.invoke({})
