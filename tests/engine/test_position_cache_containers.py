"""The cache of latest positions keeps a plain dict or list of immutable items as a copy of
its container, not as JSON: the next run reads the same items, and no caller's change in
place reaches the cache."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, add, node

pytestmark = pytest.mark.anyio


class Tag(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    turn: int = 0


class Tagged(BaseState):
    tags: dict[str, Tag | None] = Field(default_factory=dict)
    log: Annotated[list[str], add] = Field(default_factory=list)
    turn: int = 0


SEEN: list[dict[str, Any]] = []


@node
def tag(state: Tagged) -> dict[str, Any]:
    SEEN.append({"tags": state.tags, "log": state.log})
    turn = state.turn + 1
    return {
        "tags": {**state.tags, f"t{turn}": Tag(name=f"t{turn}", turn=turn)},
        "log": [f"turn {turn}"],
        "turn": turn,
    }


class CountingLoads(InMemoryStateStore):
    """Counts the loads that go past the cache to the store's records."""

    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    async def read_tail(
        self, thread_id: str, branch_id: str, *, at: int | None = None
    ) -> list[dict[str, object]]:
        self.loads += 1
        return await super().read_tail(thread_id, branch_id, at=at)


def _graph(store: InMemoryStateStore) -> Graph[Tagged]:
    return Graph(Tagged, state_store=store).flow(START >> tag, tag >> END)


async def test_the_next_run_reads_the_same_immutable_items_from_the_cache() -> None:
    store = CountingLoads()
    graph = _graph(store)
    first = await graph.ainvoke({}, thread_id="t")
    loads = store.loads
    SEEN.clear()
    await graph.ainvoke({}, thread_id="t")
    assert store.loads == loads  # answered from the cache
    assert SEEN[0]["tags"] == first.state.tags
    assert SEEN[0]["tags"]["t1"] is first.state.tags["t1"]  # frozen: shared, not decoded


async def test_a_caller_changing_a_result_in_place_does_not_reach_the_next_run() -> None:
    store = CountingLoads()
    graph = _graph(store)
    first = await graph.ainvoke({}, thread_id="t")
    first.state.tags["intruder"] = Tag(name="intruder")
    first.state.log.append("intruder")
    SEEN.clear()
    second = await graph.ainvoke({}, thread_id="t")
    assert SEEN[0] == {"tags": {"t1": Tag(name="t1", turn=1)}, "log": ["turn 1"]}
    second.state.tags.clear()
    snapshot = await graph.get_state("t")
    assert set(snapshot.value.tags) == {"t1", "t2"}
    assert snapshot.value.log == ["turn 1", "turn 2"]


async def test_runs_from_the_cache_end_as_runs_from_the_stored_records() -> None:
    store = CountingLoads()
    cached = _graph(store)
    for _ in range(3):
        await cached.ainvoke({}, thread_id="t")
    replayed_store = CountingLoads()
    for _ in range(3):
        await _graph(replayed_store).ainvoke({}, thread_id="t")  # a new graph loads each time
    assert replayed_store.loads > store.loads
    expected = (await _graph(replayed_store).get_state("t")).value
    assert (await cached.get_state("t")).value == expected
    assert (await _graph(store).get_state("t")).value == expected
