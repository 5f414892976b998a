"""One state machine: the position replayed from stored records is the position the run had.

A hypothesis property builds random graphs (nodes that append, merge, overwrite a plain
field, route by edges, ``when``, ``Command`` and ``Send``, fail once when armed, pause
for an answer when armed, and some answer from the node cache) and drives random sessions
against them: new input, continuing after a failure, answering a pause, ``update_state``
edits (``Replace`` too, and ``as_node=``) and forks continued on their branch. Every time
the engine commits records, the test keeps a copy of the live position; at the end, for
every one of those commits, the records in the store up to it are replayed
(``superstep.replay``) and must give exactly that position.
"""

from __future__ import annotations

import contextlib
import copy
import operator
from collections.abc import Callable
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
    Command,
    FilesystemStateStore,
    Graph,
    InMemoryStateStore,
    NodeContext,
    NodestepError,
    Replace,
    Resume,
    RetryPolicy,
    Send,
    add,
    interrupt,
    merge_dict,
    node,
    when,
)
from nodestep._engine.writer import HistoryWriter
from nodestep._superstep.position import Position
from nodestep._superstep.replay import replay
from nodestep.store import StateStore
from store_helpers import spy_on_commits

NAMES = ["a", "b", "c", "d"]


class Tape(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)
    tags: Annotated[dict[str, int], merge_dict] = Field(default_factory=dict)
    last: str = ""
    hops: Annotated[int, operator.add] = 0


class Faults:
    """What the test arms from outside the graph: a node fails, or pauses, on its next run."""

    def __init__(self) -> None:
        self.fail: set[str] = set()
        self.ask: set[str] = set()


node_plans = st.fixed_dictionaries(
    {
        "writes_last": st.booleans(),
        "route": st.sampled_from(["edge", "when", "command", "command", "send", "send", "end"]),
        "targets": st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True),
        "private": st.booleans(),
        "retry": st.booleans(),
        "cached": st.booleans(),
    }
)


class Notes(BaseModel):
    """A node's private state: what its first task of each superstep saw."""

    seen: list[str] = []


def make_node(name: str, plan: dict[str, Any], faults: Faults, nodes: dict[str, Any]) -> Any:
    # ``nodes`` is filled once every node exists: a Send names its target node object.
    options: dict[str, Any] = {}
    if plan.get("private"):
        options["private_state"] = Notes
    if plan.get("retry"):  # an armed failure is then retried once, recorded, and passes
        options["retry"] = RetryPolicy(attempts=2, backoff=0)
    if plan.get("cached"):
        options["cache"] = CachePolicy(key=lambda state: state.hops)

    @node(name=name, **options)
    def body(state: Tape, ctx: NodeContext, notes: Notes | None = None) -> Any:
        if name in faults.fail:
            faults.fail.discard(name)
            raise RuntimeError(f"{name} fails once")
        answer = ""
        if name in faults.ask:
            answer = str(interrupt({"node": name, "hops": state.hops}, id="ok"))
            faults.ask.discard(name)
        if notes is not None and ctx.task_id == name:  # one change per superstep
            notes.seen.append(f"{state.hops}{answer}")
        update: dict[str, Any] = {"log": [f"{name}{state.hops}{answer}"], "tags": {name: ctx.step}}
        if plan["writes_last"]:
            update["last"] = name
        update["hops"] = 1
        if plan["route"] == "command":
            return Command(update=update, goto=plan["targets"] if state.hops < 6 else END)
        if plan["route"] == "send":
            sends = [Send(nodes[t], {"last": f"from {name}"}) for t in plan["targets"]]
            return Command(update=update, goto=sends if state.hops < 6 else END)
        return update

    return body


def build_graph(plans: list[dict[str, Any]], store: StateStore, faults: Faults) -> Graph[Tape]:
    names = NAMES[: len(plans)]
    for plan in plans:  # route only to nodes this graph has
        plan["targets"] = [t for t in plan["targets"] if t in names] or ["a"]
    reachable, todo = {"a"}, ["a"]
    while todo:
        plan = plans[names.index(todo.pop())]
        if plan["route"] != "end":
            for target in plan["targets"][: 1 if plan["route"] in ("edge", "when") else None]:
                if target not in reachable:
                    reachable.add(target)
                    todo.append(target)
    nodes: dict[str, Any] = {}
    nodes.update(
        (n, make_node(n, plans[names.index(n)], faults, nodes)) for n in names if n in reachable
    )
    for name, body in nodes.items():  # declared after all exist: the graph may have cycles
        plan = plans[names.index(name)]
        if plan["route"] in ("command", "send"):
            body.goto = (*(nodes[t] for t in plan["targets"]), END)
    edges: list[Any] = [START >> nodes["a"]]
    for name, body in nodes.items():
        plan = plans[names.index(name)]
        target = nodes.get(plan["targets"][0], nodes["a"])  # only "end" routes leave it out
        if plan["route"] == "edge":
            edges.append(body >> target)
        elif plan["route"] == "when":
            edges.append(body >> when(lambda s: s.hops < 5, target, otherwise=END))
        elif plan["route"] == "end":
            edges.append(body >> END)
    graph = Graph(Tape, state_store=store, max_steps=10, name="tape")
    return graph.flow(*edges)


arm_ask = st.tuples(st.just("arm_ask"), st.sampled_from(NAMES))
resume = st.tuples(st.just("resume"), st.sampled_from(["yes", "no"]))
new_input = st.tuples(st.just("input"), st.lists(st.sampled_from(["x", "y"]), max_size=2))
actions = st.tuples(
    new_input,
    st.lists(
        st.one_of(
            new_input,
            st.tuples(st.just("continue"), st.none()),
            resume,
            resume,
            st.tuples(st.just("edit"), st.sampled_from(["log", "replace", "last", "tags"])),
            st.tuples(st.just("fork"), st.integers(0, 1000)),
            st.tuples(st.just("arm_fail"), st.sampled_from(NAMES)),
            st.tuples(st.just("as_node"), st.sampled_from(NAMES)),
            arm_ask,
            arm_ask,
        ),
        max_size=16,
    ),
).map(lambda first_and_rest: [first_and_rest[0], *first_and_rest[1]])

EDITS: dict[str, dict[str, Any]] = {
    "log": {"log": ["edited"]},
    "replace": {"log": Replace(["reset"])},
    "last": {"last": "edited"},
    "tags": {"tags": {"edit": 1}},
}


def act(graph: Graph[Tape], faults: Faults, branches: list[str], action: tuple[str, Any]) -> None:
    kind, arg = action
    branch = branches[-1]
    calls: dict[str, Callable[[], Any]] = {
        "input": lambda: graph.invoke(
            {"log": arg, "hops": Replace(0)}, thread_id="t", branch_id=branch
        ),
        "continue": lambda: graph.invoke(None, thread_id="t", branch_id=branch),
        "resume": lambda: graph.invoke(None, thread_id="t", branch_id=branch, resume=Resume(arg)),
        "edit": lambda: graph.update_state_sync("t", EDITS[arg], branch_id=branch, create=True),
        "as_node": lambda: graph.update_state_sync(
            "t", {"last": "as " + arg}, branch_id=branch, create=True, as_node=arg
        ),
    }
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
            calls[kind]()


def comparable(pos: Position) -> dict[str, Any]:
    """The position's fields; ``run_id`` only lives in memory (checkpoints do not store it)."""
    fields = {name: getattr(pos, name) for name in Position.__slots__ if name != "run_id"}
    return copy.deepcopy(fields)


def check_sessions(
    store: StateStore, plans: list[dict[str, Any]], steps: list[tuple[str, Any]]
) -> None:
    live: dict[tuple[str, int], dict[str, Any]] = {}

    def keep(self: HistoryWriter) -> None:
        live[(self.branch_id, self.pos.seq)] = comparable(self.pos)

    faults = Faults()
    graph = build_graph(plans, store, faults)
    branches = ["main"]
    mp = pytest.MonkeyPatch()
    spy_on_commits(mp, keep)
    try:
        for action in steps:
            act(graph, faults, branches, action)
    finally:
        mp.undo()

    async def replayed(branch: str, seq: int) -> dict[str, Any]:
        pos = replay(graph.schema, await store.read_tail("t", branch, at=seq))
        assert pos is not None
        return comparable(pos)

    for (branch, seq), expected in sorted(live.items()):
        assert anyio.run(replayed, branch, seq) == expected, f"branch {branch}, record {seq}"


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans=st.lists(node_plans, min_size=1, max_size=4), steps=actions)
def test_replay_of_the_stored_records_equals_the_live_position(
    plans: list[dict[str, Any]], steps: list[tuple[str, Any]]
) -> None:
    check_sessions(InMemoryStateStore(), plans, steps)


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans=st.lists(node_plans, min_size=1, max_size=4), steps=actions)
def test_replay_from_a_history_file_equals_the_live_position(
    tmp_path_factory: pytest.TempPathFactory,
    plans: list[dict[str, Any]],
    steps: list[tuple[str, Any]],
) -> None:
    path = Path(tmp_path_factory.mktemp("replay")) / "history.jsonl"
    store = FilesystemStateStore(path)
    try:
        check_sessions(store, plans, steps)
    finally:
        anyio.run(store.aclose)
