"""Property: graphs that each remember a thread's position never lose another's run.

A run on a thread its graph wrote takes the lease with its first records, checked against
the position the graph remembers (``_engine.loop``). Whichever graph runs next, and however
far behind its memory is, the thread ends as if one graph had made every run in turn: each
input merged once, in order, and the records numbered without a gap.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from backends import STORES
from nodestep import END, START, BaseState, Graph, Resume, add, interrupt, node


class Tally(BaseState):
    seen: Annotated[list[int], add] = Field(default_factory=list)
    asked: Annotated[list[str], add] = Field(default_factory=list)
    runs: int = 0


@node
def count(state: Tally) -> dict[str, Any]:
    return {"runs": state.runs + 1}


@node
def ask(state: Tally) -> dict[str, Any]:
    return {"asked": [interrupt("ok?", id="ok")]}


def tally_graph(store: Any, asking: bool) -> Graph[Tally]:
    if asking:
        return Graph(Tally, state_store=store).flow(START >> count, count >> ask, ask >> END)
    return Graph(Tally, state_store=store).flow(START >> count, count >> END)


# Each step: which of three graphs acts, and the input it sends (or answers a pause with).
STEPS = st.lists(
    st.tuples(st.integers(min_value=0, max_value=2), st.integers(min_value=0, max_value=99)),
    min_size=1,
    max_size=10,
)


async def play(store_kind: str, asking: bool, steps: list[tuple[int, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = STORES[store_kind](Path(tmp))
        try:
            graphs = [tally_graph(store, asking) for _ in range(3)]
            expected_seen: list[int] = []
            expected_asked: list[str] = []
            paused = False
            for which, value in steps:
                graph = graphs[which]
                if paused:  # the thread waits for an answer, whoever asked
                    result = await graph.ainvoke(None, thread_id="t", resume=Resume(str(value)))
                    expected_asked.append(str(value))
                else:
                    result = await graph.ainvoke({"seen": [value]}, thread_id="t")
                    expected_seen.append(value)
                paused = result.status == "interrupted"
                assert paused == (asking and result.state.runs > len(expected_asked))
                assert result.state.seen == expected_seen
                assert result.state.asked == expected_asked
                assert result.state.runs == len(expected_seen)
            records = await store.read("t", "main")
            assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
            started = [r for r in records if r["type"] == "run_started"]
            assert len(started) == len(steps)
            await store.acquire_lease("t", "main", "after", ttl=30)  # no run kept it
        finally:
            await store.aclose()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    store_kind=st.sampled_from(["memory", "sqlite", "filesystem"]),
    asking=st.booleans(),
    steps=STEPS,
)
def test_graphs_taking_turns_on_a_thread_lose_and_repeat_nothing(
    store_kind: str, asking: bool, steps: list[tuple[int, int]]
) -> None:
    anyio.run(play, store_kind, asking, steps)
