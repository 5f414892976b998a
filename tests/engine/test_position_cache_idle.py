"""The cache of latest positions keeps an idle position (nothing pending, failed or held) as
its values' JSON alone: decoded, it is the position a load from the store gives, as a
checkpoint's body decodes to, and a caller's change in place never reaches it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import Field

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, interrupt, node
from nodestep._engine.positions import PositionCache, _idle, load_position
from nodestep._superstep.position import Position

pytestmark = pytest.mark.anyio


class Notes(BaseState):
    notes: dict[str, list[int]] = Field(default_factory=dict)  # kept as JSON
    turn: int = 0
    ask: bool = False


@node
def note(state: Notes) -> dict[str, Any]:
    turn = state.turn + 1
    if state.ask:
        interrupt("more?", id="more")  # a paused position: kept as a checkpoint's body
    return {"notes": {**state.notes, f"n{turn}": [turn, turn * 2]}, "turn": turn}


def _graph(store: InMemoryStateStore) -> Graph[Notes]:
    return Graph(Notes, state_store=store).flow(START >> note, note >> END)


async def _cached_and_loaded(graph: Graph[Notes], thread: str) -> tuple[Position, Position]:
    engine = graph._engine_graph()
    store, schema = graph.state_store, engine.schema
    assert store is not None
    cached = engine.positions.newest(store, schema, thread, "main")
    assert cached is not None
    loaded = await load_position(store, schema, thread, "main", cache=PositionCache())
    assert loaded is not None
    return cached, loaded


@pytest.mark.parametrize("ask", [False, True])
async def test_a_cached_position_is_the_one_a_load_gives(ask: bool) -> None:
    graph = _graph(InMemoryStateStore())
    await graph.ainvoke({}, thread_id="t")
    await graph.ainvoke({"ask": ask}, thread_id="t")  # ask: paused, not idle
    engine = graph._engine_graph()
    entry = engine.positions._entries[(id(graph.state_store), "t", "main")]
    assert (entry.idle is None) is ask
    cached, loaded = await _cached_and_loaded(graph, "t")
    assert cached == loaded  # every field: values, status, step, turn, seq, ids, ...


async def test_a_change_in_place_of_a_decoded_position_does_not_reach_the_cache() -> None:
    graph = _graph(InMemoryStateStore())
    first = await graph.ainvoke({}, thread_id="t")
    first.state.notes["n1"].append(99)  # the caller's result
    cached, _ = await _cached_and_loaded(graph, "t")
    cached.values["notes"]["n1"].append(98)  # a run's own position
    again, loaded = await _cached_and_loaded(graph, "t")
    assert again.values["notes"] == loaded.values["notes"] == {"n1": [1, 2]}


# What an idle entry keeps besides the values (``_Idle``), and what ``_Entry`` keeps itself.
_SCALARS = {"values", "status", "step", "turn", "since_checkpoint", "run_id", "seq", "event_id"}


@pytest.mark.parametrize(
    "name", [f.name for f in dataclasses.fields(Position) if f.name not in _SCALARS]
)
def test_a_position_holding_anything_else_is_not_kept_as_idle(name: str) -> None:
    # A field added to Position later fails here until ``_idle`` looks at it: else the
    # cache would drop it from every position it keeps as idle.
    pos = Position({})
    assert _idle(pos) is not None
    kind = type(getattr(pos, name))
    held: Any = {"k": "v"} if kind is dict else ["v"] if kind is list else object()
    object.__setattr__(pos, name, held)
    assert _idle(pos) is None


class Mixed(BaseState):
    notes: dict[str, list[int]] = Field(default_factory=dict)  # JSON
    seen: list[str] = Field(default_factory=list)  # a container of immutable items
    turn: int = 0  # immutable: shared
    label: str = ""  # immutable: shared


@node
def mix(state: Mixed) -> dict[str, Any]:
    turn = state.turn + 1
    return {"notes": {f"n{turn}": [turn]}, "seen": [*state.seen, f"s{turn}"], "turn": turn}


async def test_an_entry_keeps_shared_values_containers_and_the_rest_as_json_apart() -> None:
    graph = Graph(Mixed, state_store=InMemoryStateStore()).flow(START >> mix, mix >> END)
    await graph.ainvoke({"label": "x"}, thread_id="t")
    result = await graph.ainvoke({}, thread_id="t")
    entry = graph._engine_graph().positions._entries[(id(graph.state_store), "t", "main")]
    assert entry.shared == {"turn": 2, "label": "x"}
    assert entry.containers == {"seen": ["s1", "s2"]}
    assert entry.containers["seen"] is not result.state.seen  # a copy of its own
    assert entry.data == b'{"notes":{"n2":[2]}}'  # the rest alone, in its JSON form
    cached, loaded = await _cached_and_loaded(graph, "t")
    assert cached == loaded
    assert list(cached.values) == ["notes", "seen", "turn", "label"]  # field order
