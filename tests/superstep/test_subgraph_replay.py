"""Replay equals live with subgraphs: the parent's position, child records included.

A hypothesis property drives random sessions on a graph whose first superstep runs a
subgraph task beside a plain task (so their commits interleave); the child runs two tasks
at once too, one of them a grandchild graph. Nodes at every level fail once or pause when
armed: new input, continuing, answering, forks continued on their
branch. After every append of the thread's own writer, the test keeps a copy of the live
position, child records included; each must equal the replay of the stored records up to
that append. Then the child's records replay, with the child's schema, into a position.
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    FilesystemStateStore,
    Graph,
    InMemoryStateStore,
    NodestepError,
    Resume,
    add,
    interrupt,
    node,
    subgraph,
)
from nodestep._engine.writer import HistoryWriter
from nodestep._superstep.position import Position
from nodestep._superstep.replay import replay
from nodestep.store import StateStore

INNER = ["c1", "c2", "c4", "d1"]


class Tape(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)


class Faults:
    def __init__(self) -> None:
        self.fail: set[str] = set()
        self.ask: set[str] = set()


def make(name: str, faults: Faults, goto: list[Any] | None = None) -> Any:
    @node(name=name, goto=goto)
    def body(state: Tape) -> Any:
        if name in faults.fail:
            faults.fail.discard(name)
            raise RuntimeError(f"{name} fails once")
        answer = ""
        if name in faults.ask:
            answer = str(interrupt(name, id="ok"))
            faults.ask.discard(name)
        update = {"log": [f"{name}{answer}"]}
        return Command(update=update, goto=goto) if goto else update

    return body


def build(store: StateStore, faults: Faults) -> tuple[Graph[Tape], Graph[Tape]]:
    d1 = make("d1", faults)
    c3 = subgraph("c3", Graph(Tape, name="grandchild").flow(START >> d1, d1 >> END))
    c1, c4 = make("c1", faults), make("c4", faults)
    c2 = make("c2", faults, goto=[c3, c4])
    child = Graph(Tape, name="child").flow(START >> c1, c1 >> c2, c3 >> END, c4 >> END)
    sub, side = subgraph("sub", child), make("side", faults)
    split = make("split", faults, goto=[sub, side])
    parent = Graph(Tape, name="parent", state_store=store, max_steps=10)
    return parent.flow(START >> split, sub >> END, side >> END), child


actions = st.lists(
    st.one_of(
        st.tuples(st.just("input"), st.none()),
        st.tuples(st.just("continue"), st.none()),
        st.tuples(st.just("resume"), st.sampled_from(["y", "n"])),
        st.tuples(st.just("fork"), st.integers(0, 1000)),
        st.tuples(st.just("fail"), st.sampled_from([*INNER, "side"])),
        st.tuples(st.just("ask"), st.sampled_from([*INNER, "side"])),
    ),
    min_size=1,
    max_size=14,
)


def act(graph: Graph[Tape], faults: Faults, branches: list[str], kind: str, arg: Any) -> None:
    branch = branches[-1]
    if kind == "fail":
        faults.fail.add(arg)
    elif kind == "ask":
        faults.ask.add(arg)
    elif kind == "fork":
        events = graph.history_sync("t", branch_id=branch).events
        if events:
            branches.append(graph.fork_sync("t", from_=events[arg % len(events)].id).id)
    else:
        resume = Resume(arg) if kind == "resume" else None
        with contextlib.suppress(NodestepError, RuntimeError):
            if kind == "input":
                graph.invoke({"log": ["in"]}, thread_id="t", branch_id=branch)
            else:
                graph.invoke(None, thread_id="t", branch_id=branch, resume=resume)


def comparable(pos: Position) -> dict[str, Any]:
    fields = {name: getattr(pos, name) for name in Position.__slots__ if name != "run_id"}
    return copy.deepcopy(fields)


def check(store: StateStore, steps: list[tuple[str, Any]]) -> None:
    faults = Faults()
    graph, child = build(store, faults)
    live: dict[tuple[str, int], dict[str, Any]] = {}
    original = HistoryWriter._commit

    async def spy(self: HistoryWriter, records: Any) -> str:
        event_id = await original(self, records)
        live[(self.branch_id, self.pos.seq)] = comparable(self.pos)
        return event_id

    branches = ["main"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(HistoryWriter, "_commit", spy)
        graph.invoke({}, thread_id="t")
        for kind, arg in steps:
            act(graph, faults, branches, kind, arg)

    async def replayed(branch: str, seq: int) -> Position:
        pos = replay(graph.schema, await store.read_tail("t", branch, at=seq))
        assert pos is not None
        return pos

    for (branch, seq), expected in sorted(live.items()):
        pos = anyio.run(replayed, branch, seq)
        assert comparable(pos) == expected, f"branch {branch}, record {seq}"
        for records in pos.children.values():
            assert replay(child.schema, records) is not None


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=actions)
def test_replay_with_subgraph_records_equals_the_live_position(steps: list[Any]) -> None:
    check(InMemoryStateStore(), steps)


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=actions)
def test_replay_of_a_history_file_with_subgraph_records_equals_the_live_position(
    tmp_path_factory: pytest.TempPathFactory, steps: list[Any]
) -> None:
    store = FilesystemStateStore(Path(tmp_path_factory.mktemp("nested")) / "history.jsonl")
    try:
        check(store, steps)
    finally:
        anyio.run(store.aclose)
