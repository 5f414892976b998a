"""Replay equals live on one graph that uses several features at once.

The graph fans out to a subgraph and a plain node and joins them; the subgraph holds a
retried node, a node with private state and a cached node; a breaker node follows the
join. A hypothesis property drives random sessions (new input, continuing after a
failure, answering a pause three levels of keys down, ``update_state(as_node=)`` on the
fan-out and the join's sources, forks continued on their branch) with nodes at both
levels armed to fail or pause. After every commit the test keeps a copy of the live
position; each must equal the replay of the stored records up to that commit.
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
from pydantic import BaseModel, Field

from nodestep import (
    END,
    START,
    BaseState,
    CachePolicy,
    CircuitBreaker,
    FilesystemStateStore,
    Graph,
    InMemoryStateStore,
    NodestepError,
    Resume,
    RetryPolicy,
    add,
    interrupt,
    node,
)
from nodestep._engine.writer import HistoryWriter
from nodestep._superstep.position import Position
from nodestep._superstep.replay import replay
from nodestep.store import StateStore
from store_helpers import spy_on_commits

NAMES = ["a", "b", "c1", "c2", "c3", "d"]


class Tape(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)
    note: str = ""


class Seen(BaseModel):
    count: int = 0


class Faults:
    def __init__(self) -> None:
        self.fail: set[str] = set()
        self.ask: set[str] = set()


def check(name: str, faults: Faults) -> str:
    """Fail or pause once when armed; return the answer of a pause."""
    if name in faults.fail:
        faults.fail.discard(name)
        raise RuntimeError(f"{name} fails once")
    if name in faults.ask:
        answer = str(interrupt({"node": name}, id="ok"))
        faults.ask.discard(name)
        return answer
    return ""


def build(store: StateStore, faults: Faults) -> Graph[Tape]:
    def plain(name: str, **options: Any) -> Any:
        def body(state: Tape) -> dict[str, Any]:
            return {"log": [f"{name}{len(state.log)}{check(name, faults)}"]}

        return node(body, name=name, **options)

    @node(private_state=Seen)
    def c2(state: Tape, seen: Seen) -> dict[str, Any]:
        answer = check("c2", faults)
        seen.count += 1
        return {"log": [f"c2#{seen.count}{answer}"]}

    c1 = plain("c1", retry=RetryPolicy(attempts=2, backoff=0))
    c3 = plain("c3", cache=CachePolicy(key=lambda state: len(state.log)))
    child = Graph(Tape, name="child").flow(START >> c1 >> c2 >> c3 >> END)
    a, b = plain("a"), plain("b")
    d = plain("d", breaker=CircuitBreaker(failures=5, window=60, cooldown=0))
    graph = Graph(Tape, state_store=store, name="combined", max_steps=10)
    return graph.flow(START >> a >> [child, b], [child, b] >> d >> END)


new_input = st.tuples(st.just("input"), st.sampled_from(["x", "y"]))
actions = st.tuples(
    new_input,
    st.lists(
        st.one_of(
            new_input,
            st.tuples(st.just("continue"), st.none()),
            st.tuples(st.just("resume"), st.sampled_from(["yes", "no"])),
            st.tuples(st.just("arm_fail"), st.sampled_from(NAMES)),
            st.tuples(st.just("arm_ask"), st.sampled_from(NAMES)),
            st.tuples(st.just("as_node"), st.sampled_from(["a", "b", "child", "d"])),
            st.tuples(st.just("fork"), st.integers(0, 1000)),
        ),
        max_size=12,
    ),
).map(lambda first_and_rest: [first_and_rest[0], *first_and_rest[1]])


def act(graph: Graph[Tape], faults: Faults, branches: list[str], action: tuple[str, Any]) -> None:
    kind, arg = action
    branch = branches[-1]
    if kind == "arm_fail":
        faults.fail.add(arg)
    elif kind == "arm_ask":
        faults.ask.add(arg)
    elif kind == "fork":
        events = graph.history_sync("t", branch_id=branch).events
        if events:
            at = events[arg % len(events)].id
            branches.append(graph.fork_sync("t", from_=at).id)
    else:
        # A failed run, or a call that does not fit the thread's status, is part of the game.
        with contextlib.suppress(NodestepError, RuntimeError):
            if kind == "input":
                graph.invoke({"note": arg}, thread_id="t", branch_id=branch)
            elif kind == "continue":
                graph.invoke(None, thread_id="t", branch_id=branch)
            elif kind == "resume":
                graph.invoke(None, thread_id="t", branch_id=branch, resume=Resume(arg))
            else:
                graph.update_state_sync(
                    "t", {"note": "as " + arg}, branch_id=branch, create=True, as_node=arg
                )


def comparable(pos: Position) -> dict[str, Any]:
    """The position's fields; ``run_id`` only lives in memory (checkpoints do not store it)."""
    fields = {name: getattr(pos, name) for name in Position.__slots__ if name != "run_id"}
    return copy.deepcopy(fields)


def check_sessions(store: StateStore, steps: list[tuple[str, Any]]) -> None:
    live: dict[tuple[str, int], dict[str, Any]] = {}

    def keep(self: HistoryWriter) -> None:
        if self.thread_id == "t":  # the top writer; a child's records go through it too
            live[(self.branch_id, self.pos.seq)] = comparable(self.pos)

    faults = Faults()
    graph = build(store, faults)
    branches = ["main"]
    with pytest.MonkeyPatch.context() as mp:
        spy_on_commits(mp, keep)
        for action in steps:
            act(graph, faults, branches, action)

    async def replayed(branch: str, seq: int) -> dict[str, Any]:
        pos = replay(graph.schema, await store.read_tail("t", branch, at=seq))
        assert pos is not None
        return comparable(pos)

    assert live
    for (branch, seq), expected in sorted(live.items()):
        assert anyio.run(replayed, branch, seq) == expected, f"branch {branch}, record {seq}"


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=actions)
def test_replay_of_a_graph_with_joins_subgraphs_and_policies_equals_live(
    steps: list[tuple[str, Any]],
) -> None:
    check_sessions(InMemoryStateStore(), steps)


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=actions)
def test_replay_of_the_combined_graph_from_a_history_file_equals_live(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, Any]]
) -> None:
    store = FilesystemStateStore(Path(tmp_path_factory.mktemp("combined")) / "history.jsonl")
    try:
        check_sessions(store, steps)
    finally:
        anyio.run(store.aclose)
