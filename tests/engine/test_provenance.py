"""Provenance: who wrote a state field's value, read from a store alone, on every store.

Each kind of writer is named as such (the defaults, a run's input, a node, a node resumed
with an answer, ``update_state`` with and without ``as_node``, a migration, a fork whose
parent was pruned); a field with a reducer lists every write merged since it was last
replaced; a value written before a fork is named by the parent's event.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    Replace,
    Resume,
    Send,
    UnknownThreadError,
    add,
    interrupt,
    node,
)
from nodestep.history import Provenance, provenance
from nodestep.store import StateStore
from nodestep.testing import sequential_ids, ticking_clock

pytestmark = pytest.mark.anyio


class Review(BaseState):
    topic: str = ""
    drafts: Annotated[list[str], add] = Field(default_factory=list)
    verdict: str = ""


@node
async def write(state: Review) -> dict[str, Any]:
    return {"drafts": [f"a post on {state.topic}"]}


@node(goto=[write])
def plan(state: Review) -> Command:
    return Command(goto=[Send(write, {"topic": topic}) for topic in ("tea", "cake")])


@node
def review(state: Review) -> dict[str, Any]:
    return {"verdict": interrupt({"drafts": state.drafts}, id="verdict")}


def review_graph(store: StateStore) -> Graph[Review]:
    return Graph(
        Review, state_store=store, id_factory=sequential_ids(), clock=ticking_clock(start=100.0)
    ).flow(START >> plan, write >> review, review >> END)


async def test_a_node_write_names_its_event_node_run_and_time(store: StateStore) -> None:
    graph = review_graph(store)
    result = await graph.ainvoke({"topic": "food"}, thread_id="t")
    await graph.ainvoke(None, thread_id="t", resume=Resume("publish"))
    events = {e.sequence: e for e in await graph.history("t")}

    found = await provenance(store, "t", "verdict")

    assert isinstance(found, Provenance)
    assert (found.value, found.reducer, len(found.writes)) == ("publish", False, 1)
    writer = found.writer
    assert (writer.kind, writer.node, writer.value) == ("resume", "review", "publish")
    assert writer.event_id == events[writer.sequence].id
    assert events[writer.sequence].type == "superstep_completed"
    assert writer.timestamp == events[writer.sequence].timestamp
    assert writer.run_id is not None and writer.run_id != result.run_id


async def test_an_input_is_named_as_the_runs_input(store: StateStore) -> None:
    graph = review_graph(store)
    result = await graph.ainvoke({"topic": "food"}, thread_id="t")

    writer = (await provenance(store, "t", "topic")).writer

    assert (writer.kind, writer.node, writer.value, writer.run_id) == (
        "input",
        None,
        "food",
        result.run_id,
    )


async def test_a_field_never_written_is_named_by_the_defaults(store: StateStore) -> None:
    graph = review_graph(store)
    await graph.ainvoke({"topic": "food"}, thread_id="t")

    writer = (await provenance(store, "t", "verdict")).writer

    assert (writer.kind, writer.sequence, writer.value) == ("defaults", 1, "")


async def test_a_reducer_field_lists_every_write_merged_into_it(store: StateStore) -> None:
    graph = review_graph(store)
    await graph.ainvoke({"topic": "food"}, thread_id="t")

    found = await provenance(store, "t", "drafts")

    assert found.reducer
    assert found.value == ["a post on tea", "a post on cake"]
    assert [(w.kind, w.node, w.task_id, w.value) for w in found.writes] == [
        ("node", "write", None, ["a post on tea"]),
        ("node", "write", "write[1]", ["a post on cake"]),
    ]
    assert sorted(w.sequence for w in found.writes) == [4, 5]  # both task_finished, in either order


async def test_update_state_is_named_with_its_as_node(store: StateStore) -> None:
    graph = review_graph(store)
    await graph.ainvoke({"topic": "food"}, thread_id="t")
    edit = await graph.update_state("t", {"topic": "desserts"})

    writer = (await provenance(store, "t", "topic")).writer

    assert (writer.kind, writer.node, writer.event_id, writer.run_id) == (
        "update_state",
        None,
        edit,
        None,
    )


class Counter(BaseState):
    n: int = 0
    log: Annotated[list[str], add] = Field(default_factory=list)


@node
def bump(state: Counter) -> dict[str, Any]:
    return {"n": state.n + 1, "log": [f"bump {state.n}"]}


@node
def finish(state: Counter) -> dict[str, Any]:
    return {"log": ["finish"]}


async def test_update_state_as_node_names_the_node(store: StateStore) -> None:
    graph = Graph(Counter, state_store=store).flow(START >> bump, bump >> finish, finish >> END)
    await graph.ainvoke({}, thread_id="t", interrupt_before=["finish"])
    edit = await graph.update_state("t", {"log": ["by hand"]}, as_node="finish")
    pending = await provenance(store, "t", "log", state=Counter)
    await graph.ainvoke(None, thread_id="t")  # merges the edit as finish's result

    found = await provenance(store, "t", "log", state=Counter)

    assert pending.value == ["bump 0"]  # an unfinished superstep's results are not merged yet
    assert (found.writer.kind, found.writer.node, found.writer.event_id) == (
        "update_state",
        "finish",
        edit,
    )
    assert [w.value for w in found.writes] == [["bump 0"], ["by hand"]]


async def test_replace_starts_a_reducer_fields_writes_anew(store: StateStore) -> None:
    graph = Graph(Counter, state_store=store).flow(START >> bump, bump >> END)
    await graph.ainvoke({}, thread_id="t")
    edit = await graph.update_state("t", {"log": Replace(["fresh"])})
    await graph.ainvoke({}, thread_id="t")

    found = await provenance(store, "t", "log")  # Replace shows the reducer: no state needed

    assert found.reducer
    assert found.value == ["fresh", "bump 1"]
    assert [(w.event_id == edit, w.replaced, w.value) for w in found.writes] == [
        (True, True, ["fresh"]),
        (False, False, ["bump 1"]),
    ]


async def test_at_an_earlier_event_names_the_writer_then(store: StateStore) -> None:
    graph = Graph(Counter, state_store=store).flow(START >> bump, bump >> END)
    await graph.ainvoke({}, thread_id="t")
    first = (await graph.history("t")).events[-1]
    await graph.ainvoke({}, thread_id="t")

    then = await provenance(store, "t", "n", at=first.id)
    now = await provenance(store, "t", "n")

    assert (then.value, then.sequence, then.event_id) == (1, first.sequence, first.id)
    assert now.value == 2 and now.writer.sequence > then.writer.sequence


async def test_a_value_written_before_a_fork_is_named_by_the_parents_event(
    store: StateStore,
) -> None:
    graph = review_graph(store)
    await graph.ainvoke({"topic": "food"}, thread_id="t")
    paused = (await graph.state_history("t")).last_pause()
    assert paused is not None
    branch = await graph.fork("t", from_=paused.event.id, name="alt")
    await graph.ainvoke(None, thread_id="t", branch_id=branch.id, resume=Resume("reject"))

    drafts = await provenance(store, "t", "drafts", branch_id="alt")
    verdict = await provenance(store, "t", "verdict", branch_id="alt")

    assert {w.branch_id for w in drafts.writes} == {"main"}
    assert drafts.value == ["a post on tea", "a post on cake"]
    assert (verdict.branch_id, verdict.writer.branch_id, verdict.value) == ("alt", "alt", "reject")
    assert verdict.writer.kind == "resume"


async def test_a_fork_whose_parent_was_pruned_is_the_writer() -> None:
    store = InMemoryStateStore()
    graph = Graph(Counter, state_store=store, max_steps=500).flow(START >> bump, bump >> END)
    for _ in range(30):  # enough records for later checkpoints to prune up to
        await graph.ainvoke({}, thread_id="t")
    early = (await graph.history("t")).events[5]
    await graph.fork("t", from_=early.id, name="early")
    assert await graph.prune("t", keep_last=10) > 0

    writer = (await provenance(store, "t", "n", branch_id="early", state=Counter)).writer

    assert (writer.kind, writer.branch_id) == ("fork", "early")


class Renamed(BaseState):
    count: int = 0


async def test_a_migration_is_the_writer_of_the_values_it_set(store: StateStore) -> None:
    graph = Graph(Counter, state_store=store).flow(START >> bump, bump >> END)
    await graph.ainvoke({}, thread_id="t")
    moved = Graph(Renamed, state_store=store)
    event = await moved.migrate("t", lambda old: {"count": old["n"]}, from_state=Counter)

    writer = (await provenance(store, "t", "count")).writer

    assert (writer.kind, writer.event_id, writer.value) == ("migration", event, 1)


async def test_a_reducer_is_read_from_a_checkpoint_that_is_not_the_last_write() -> None:
    store = InMemoryStateStore()
    graph = Graph(Counter, state_store=store, max_steps=500).flow(START >> bump, bump >> END)
    for _ in range(30):  # one write per run: a checkpoint shows the writes were merged
        await graph.ainvoke({}, thread_id="t")

    found = await provenance(store, "t", "log")

    assert found.reducer
    assert found.value == [f"bump {n}" for n in range(30)]
    assert len(found.writes) == 30


async def test_the_graph_method_knows_the_reducers_from_the_state_class(
    store: StateStore,
) -> None:
    graph = Graph(Counter, state_store=store).flow(START >> bump, bump >> END)
    await graph.ainvoke({}, thread_id="t")
    await graph.ainvoke({}, thread_id="t")

    found = await graph.provenance("t", "log")

    assert found.reducer and found.value == ["bump 0", "bump 1"]
    assert graph.provenance_sync("t", "n").value == 2


async def test_to_json_str_and_repr_are_plain_and_short(store: StateStore) -> None:
    graph = review_graph(store)
    await graph.ainvoke({"topic": "food"}, thread_id="t")

    found = await provenance(store, "t", "drafts")

    data = found.to_json()
    assert json.loads(json.dumps(data)) == data
    assert data["field"] == "drafts" and data["reducer"] is True
    assert [w["node"] for w in data["writes"]] == ["write", "write"]
    assert repr(found) == "Provenance('drafts', thread='t', branch='main', seq=7, writes=2)"
    text = str(found)
    assert text.splitlines()[0] == 'drafts = ["a post on tea", "a post on cake"]'
    assert "node write (write[1]) at event " in text


async def test_an_unknown_thread_branch_event_or_field_is_named_with_the_fix(
    store: StateStore,
) -> None:
    graph = review_graph(store)
    await graph.ainvoke({"topic": "food"}, thread_id="t")

    with pytest.raises(UnknownThreadError, match="Thread 'nope' has no history"):
        await provenance(store, "nope", "topic")
    with pytest.raises(UnknownThreadError, match="on branch 'ghost'"):
        await provenance(store, "t", "topic", branch_id="ghost")
    with pytest.raises(UnknownThreadError, match="no branch or event 'missing-event'"):
        await provenance(store, "t", "topic", at="missing-event")
    with pytest.raises(GraphConfigError, match=r"no state field 'topc'.*'topic', 'drafts'"):
        await provenance(store, "t", "topc")
    with pytest.raises(GraphConfigError, match="at= takes the id of a history event"):
        await provenance(store, "t", "topic", at="")
    with pytest.raises(GraphConfigError, match="state= takes the thread's state class"):
        await provenance(store, "t", "topic", state=dict)  # type: ignore[arg-type]


async def test_an_event_on_another_branch_than_branch_id_is_refused(store: StateStore) -> None:
    graph = review_graph(store)
    await graph.ainvoke({"topic": "food"}, thread_id="t")
    first = (await graph.history("t")).events[1]
    await graph.fork("t", from_=first.id, name="alt")

    with pytest.raises(UnknownThreadError, match="is on branch 'main', not on 'alt'"):
        await provenance(store, "t", "topic", at=first.id, branch_id="alt")


class Order(BaseState):
    steps: Annotated[list[str], add] = Field(default_factory=list)
    total: int = 0


@node
def price(state: Order) -> dict[str, Any]:
    return {"steps": ["price"], "total": 120}


@node
def tax(state: Order) -> dict[str, Any]:
    return {"steps": ["tax"], "total": state.total + 24}


@node
def receive(state: Order) -> dict[str, Any]:
    return {"steps": ["receive"]}


async def test_a_field_a_subgraph_returned_is_named_by_the_subgraph_node(
    store: StateStore,
) -> None:
    billing = Graph(Order, name="billing").flow(START >> price, price >> tax, tax >> END)
    shop = Graph(Order, state_store=store).flow(
        START >> receive, receive >> billing, billing >> END
    )
    await shop.ainvoke({}, thread_id="t")

    total = await provenance(store, "t", "total")
    steps = await provenance(store, "t", "steps")

    assert (total.value, total.writer.kind, total.writer.node) == (144, "node", "billing")
    assert [(w.node, w.value) for w in steps.writes] == [
        ("receive", ["receive"]),
        ("billing", ["price", "tax"]),  # the child's writes, as the parent merged them
    ]


def highest(current: int, update: int) -> int:
    return max(current, update)


class Score(BaseState):
    best: Annotated[int, highest] = 0


async def test_a_reducer_of_ones_own_is_known_and_exact_with_the_state_class(
    store: StateStore,
) -> None:
    @node
    def score(state: Score) -> dict[str, Any]:
        return {}

    graph = Graph(Score, state_store=store).flow(START >> score, score >> END)
    await graph.ainvoke({"best": 5}, thread_id="t")
    await graph.ainvoke({"best": 3}, thread_id="t")

    known = await graph.provenance("t", "best")
    read = await provenance(store, "t", "best")  # an int merged by a function: not seen

    assert (known.reducer, known.value) == (True, 5)
    assert [(w.kind, w.value) for w in known.writes] == [
        ("defaults", 0),
        ("input", 5),
        ("input", 3),
    ]
    assert (read.reducer, read.value) == (False, 3)
