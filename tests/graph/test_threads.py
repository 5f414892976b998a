"""Thread methods: exists, history, load, get_state, update_state, fork and branches.

Also the shape of the history itself: every record's envelope, the checkpoint cadence that
bounds a load, and time travel to every event of a run.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    FilesystemStateStore,
    Graph,
    GraphConfigError,
    History,
    HistoryEvent,
    InMemoryStateStore,
    InvalidUpdateError,
    NodeContext,
    Replace,
    Resume,
    StateSnapshot,
    StateUpdateError,
    UnknownThreadError,
    add,
    interrupt,
    node,
    when,
)
from nodestep.store import BranchRecord, StateStore
from store_helpers import Record, open_file, records, reopened
from store_helpers import counting_store as make_counting_store

pytestmark = pytest.mark.anyio


class Notes(BaseState):
    items: Annotated[list[str], add] = Field(default_factory=list)
    title: str = ""
    i: int = 0


@node
def write(state: Notes) -> dict:
    return {"items": [f"w{state.i}"], "i": state.i + 1}


def notes_graph(store: StateStore | None, **options: Any) -> Graph[Notes]:
    return Graph(Notes, state_store=store, **options).flow(START >> write, write >> END)


def loop_graph(store: StateStore, steps: int) -> Graph[Notes]:
    graph = Graph(Notes, state_store=store, max_steps=steps + 5)
    return graph.flow(START >> write, write >> when(lambda s: s.i < steps, write, otherwise=END))


# -- exists, history, load, get_state ---------------------------------------------------------


async def test_exists_is_per_thread_and_branch(store: StateStore) -> None:
    graph = notes_graph(store)
    assert await graph.exists("t") is False
    result = await graph.ainvoke({}, thread_id="t")
    assert await graph.exists("t") is True
    assert await graph.exists("other") is False
    assert await graph.exists("t", branch_id="b") is False
    await graph.fork("t", from_=result.checkpoint_id, name="b")
    assert await graph.exists("t", branch_id="b") is True


async def test_history_of_a_thread_that_never_ran_is_empty_even_with_other_threads(
    store: StateStore,
) -> None:
    graph = notes_graph(store)
    await graph.ainvoke({}, thread_id="t")
    empty = await graph.history("never")
    assert isinstance(empty, History) and empty.events == [] and len(empty) == 0
    assert (empty.thread_id, empty.branch_id) == ("never", "main")
    assert (await graph.history("t", branch_id="no-such-branch")).events == []


async def test_history_events_mirror_the_stored_records(store: StateStore) -> None:
    graph = notes_graph(store)
    await graph.ainvoke({"title": "x"}, thread_id="t")
    history = await graph.history("t")
    stored = await records(reopened(store), "t")
    assert len(history) == len(stored) == 4
    assert list(history) == history.events
    for event, record in zip(history.events, stored, strict=True):
        assert isinstance(event, HistoryEvent)
        assert (event.id, event.type, event.sequence, event.timestamp) == (
            record["id"],
            record["type"],
            record["seq"],
            record["ts"],
        )
        assert (event.thread_id, event.branch_id) == ("t", "main")
        envelope = {"id", "seq", "ts", "thread", "branch", "type"}
        assert event.data == {k: v for k, v in record.items() if k not in envelope}
    assert [e.type for e in history] == [
        "checkpoint",
        "run_started",
        "superstep_completed",
        "run_completed",
    ]
    assert history.checkpoints == [history.events[0]]


class Work(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)
    note: str = ""


async def test_history_event_types_and_their_fields(store: StateStore) -> None:
    """One thread that goes through every record type; each carries its documented fields."""
    fail = [True]

    @node
    def left(state: Work) -> dict:
        return {"log": ["left"]}

    @node
    def right(state: Work, ctx: NodeContext) -> dict:
        if fail:
            raise ValueError("right fails")
        ctx.cache["kept"] = 1
        answer = interrupt({"q": "ok?"}, id="ok")
        return {"log": [f"right {answer}"]}

    @node(goto=[left, right])
    def fan(state: Work) -> Command:
        return Command(update={"note": "fanned"}, goto=[left, right])

    graph = Graph(Work, state_store=store).flow(START >> fan, left >> END, right >> END)
    with pytest.raises(ValueError, match="right fails"):
        await graph.ainvoke({"log": ["in"]}, thread_id="t")
    fail.clear()
    assert (await graph.ainvoke(None, thread_id="t")).status == "interrupted"
    await graph.update_state("t", {"note": "edited"})
    await graph.ainvoke(None, thread_id="t", resume=Resume("yes"))
    await graph.update_state("t", {"log": Replace(["reset"])})
    await graph.ainvoke({}, thread_id="t", interrupt_before=["fan"])

    events = (await graph.history("t")).events
    types = [e.type for e in events]
    assert types == [
        "checkpoint",
        "run_started",
        "superstep_completed",
        "task_finished",
        "run_failed",
        "run_started",
        "run_paused",
        "state_updated",
        "run_started",
        "task_finished",
        "superstep_completed",
        "run_completed",
        "state_updated",
        "run_started",
        "run_stopped",
    ]
    data = [e.data for e in events]
    run1, run2, run3, run4 = (data[i]["run"] for i in (1, 5, 8, 13))
    assert len({run1, run2, run3, run4}) == 4
    assert data[0] == {"values": {"log": [], "note": ""}, "status": "idle", "step": 0}
    assert data[1] == {"run": run1, "input": {"log": ["in"]}, "tasks": ["fan"]}
    assert data[2] == {
        "step": 0,
        "tasks": {"fan": {"update": {"note": "fanned"}, "routes": ["left", "right"]}},
    }
    assert data[3] == {"step": 1, "node": "left", "update": {"log": ["left"]}}
    assert data[4] == {
        "run": run1,
        "step": 1,
        "error": "ValueError",
        "message": "right fails",
        "mergeable": True,
        "node": "right",
    }
    assert data[5] == {"run": run2}  # a continuation: neither input nor answers
    assert data[6] == {
        "run": run2,
        "step": 1,
        "interrupts": [
            {
                "key": "right:ok",
                "id": "ok",
                "node": "right",
                "task": "right",
                "payload": {"q": "ok?"},
            }
        ],
        "caches": {"right": {"kept": 1}},
    }
    assert data[7] == {"values": {"note": "edited"}}
    assert data[8] == {"run": run3, "answers": {"right:ok": "yes"}}
    assert data[9] == {"step": 1, "node": "right", "update": {"log": ["right yes"]}}
    assert data[10] == {"step": 1, "tasks": {"left": {"routes": []}, "right": {"routes": []}}}
    assert data[11] == {"run": run3, "step": 1}
    assert data[12] == {"values": {"log": ["reset"]}, "replaced": ["log"]}
    assert data[13] == {"run": run4, "input": {}, "tasks": ["fan"]}
    assert data[14] == {"run": run4, "step": 0, "reason": "interrupt_before", "nodes": ["fan"]}
    assert await graph.load("t") == {"log": ["reset"], "note": "edited"}


async def test_load_and_get_state_of_a_missing_thread_branch_or_event(store: StateStore) -> None:
    graph = notes_graph(store)
    result = await graph.ainvoke({}, thread_id="t")
    for call in (graph.load, graph.get_state):
        with pytest.raises(
            UnknownThreadError, match=r"^Thread 'missing' has no history\."
        ) as caught:
            await call("missing")
        assert (caught.value.thread_id, caught.value.branch_id) == ("missing", "main")
        assert "missing" in str(caught.value)
        with pytest.raises(
            UnknownThreadError, match=r"^Thread 't' has no history on branch 'nope'"
        ) as caught:
            await call("t", branch_id="nope")
        assert caught.value.branch_id == "nope"
        # The thread exists: a run on main would not make the branch, a fork does.
        assert "fork('t', from_=event_id, name='nope')" in str(caught.value)
        assert "invoke(input" not in str(caught.value)
        with pytest.raises(UnknownThreadError, match=r"^Thread 't' has no event '"):
            await call("t", at=str(uuid.uuid4()))
        # An event id of another thread is not an event of this one.
        with pytest.raises(
            UnknownThreadError, match=f"^Thread 'missing' has no event '{result.checkpoint_id}'"
        ):
            await call("missing", at=result.checkpoint_id)


async def test_get_state_describes_the_thread(store: StateStore) -> None:
    graph = notes_graph(store)
    result = await graph.ainvoke({"title": "x"}, thread_id="t")
    snapshot = await notes_graph(reopened(store)).get_state("t")
    assert isinstance(snapshot, StateSnapshot)
    assert type(snapshot.value) is Notes
    assert snapshot.value == result.state == Notes(items=["w0"], title="x", i=1)
    assert snapshot.sequence == 4 and snapshot.event_id == result.checkpoint_id
    assert (snapshot.thread_id, snapshot.branch_id) == ("t", "main")
    assert (snapshot.status, snapshot.next, snapshot.interrupts) == ("idle", (), {})
    with pytest.raises(AttributeError, match="can't set attribute"):
        snapshot.status = "paused"  # type: ignore[misc]
    assert snapshot._replace(status="paused").status == "paused"  # a named tuple

    started = (await graph.history("t")).events[1]
    at_start = await graph.get_state("t", at=started.id)
    assert at_start.value == Notes(title="x")
    assert (at_start.status, at_start.next, at_start.sequence) == ("running", ("write",), 2)


async def test_load_returns_a_fresh_dict_each_time(store: StateStore) -> None:
    graph = notes_graph(store)
    await graph.ainvoke({}, thread_id="t")
    loaded = await graph.load("t")
    loaded["items"].append("forged")
    loaded["title"] = "forged"
    assert await graph.load("t") == {"items": ["w0"], "title": "", "i": 1}


async def test_get_state_and_load_hand_out_values_that_share_nothing_mutable(
    store: StateStore,
) -> None:
    graph = notes_graph(store)
    await graph.ainvoke({"title": "x"}, thread_id="t")
    first = await graph.get_state("t")
    second = await graph.get_state("t")  # the graph answers this one from its cache
    assert first == second
    assert first.value is not second.value and first.value.items is not second.value.items
    second.value.items.append("forged")
    second.value.title = "forged"
    (await graph.load("t"))["items"].append("forged")
    assert (await graph.get_state("t")).value == Notes(items=["w0"], title="x", i=1)
    assert await graph.load("t") == {"items": ["w0"], "title": "x", "i": 1}
    assert (await graph.ainvoke({}, thread_id="t")).state.items == ["w0", "w1"]


class Ask(BaseState):
    answer: str = ""
    asked: Annotated[list[str], add] = Field(default_factory=list)


@node
def ask(state: Ask) -> dict:
    answer = interrupt({"question": "ok?", "options": ["y", "n"]}, id="q")
    return {"answer": answer, "asked": ["q"]}


@node
def after(state: Ask) -> dict:
    return {"asked": ["after"]}


def ask_graph(store: StateStore, **options: Any) -> Graph[Ask]:
    return Graph(Ask, state_store=store, **options).flow(START >> ask, ask >> after, after >> END)


async def test_get_state_of_a_paused_thread_hands_out_new_interrupts(store: StateStore) -> None:
    graph = ask_graph(store)
    await graph.ainvoke({}, thread_id="t")
    first = await graph.get_state("t")
    [(key, pending)] = first.interrupts.items()
    pending.payload["options"].append("forged")
    second = await graph.get_state("t")
    assert second.interrupts[key].payload == {"question": "ok?", "options": ["y", "n"]}
    assert second.interrupts[key] is not pending
    assert (second.status, second.next) == ("paused", ("ask",))


async def test_the_latest_state_is_the_same_from_the_cache_and_from_the_store(
    store: StateStore,
) -> None:
    graph = ask_graph(store, interrupt_after=["ask"])

    async def check() -> None:
        cached = (await graph.get_state("t"), await graph.get_state("t"), await graph.load("t"))
        fresh_graph = ask_graph(reopened(store))  # a new graph has nothing cached
        fresh = await fresh_graph.get_state("t")
        at_last = await fresh_graph.get_state("t", at=fresh.event_id)
        assert cached[0] == cached[1] == fresh == at_last
        assert cached[2] == await fresh_graph.load("t") == fresh.value.model_dump()

    await graph.ainvoke({}, thread_id="t")  # paused at the interrupt
    await check()
    await graph.ainvoke(
        None, thread_id="t", resume=Resume("y")
    )  # stopped at the breakpoint after 'ask'
    assert (await graph.get_state("t")).status == "running"
    await check()
    await graph.ainvoke(None, thread_id="t")  # done
    assert (await graph.get_state("t")).status == "idle"
    await check()
    await graph.update_state("t", {"answer": "edited"})
    await check()


async def test_get_state_sees_what_another_store_object_appended(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    mine, other = notes_graph(open_file(path)), notes_graph(open_file(path))
    await mine.ainvoke({}, thread_id="t")
    assert (await mine.get_state("t")).value.items == ["w0"]
    assert (await mine.get_state("t")).value.items == ["w0"]  # cached
    await other.ainvoke({}, thread_id="t")  # as another process would
    snapshot = await mine.get_state("t")
    assert snapshot.value.items == ["w0", "w1"]
    assert snapshot == await other.get_state("t")
    assert (await mine.load("t"))["items"] == ["w0", "w1"]


# -- update_state --------------------------------------------------------------------------


async def test_update_state_of_a_missing_thread(store: StateStore) -> None:
    graph = notes_graph(store)
    with pytest.raises(UnknownThreadError, match=r"^Thread 'ghost' has no history\."):
        await graph.update_state("ghost", {"title": "x"})
    assert await store.last_sequence("ghost", "main") == 0
    # create=True makes the thread: a checkpoint of the defaults, then the update.
    event_id = await graph.update_state("ghost", {"title": "x", "items": ["a"]}, create=True)
    stored = await records(reopened(store), "ghost")
    assert [r["type"] for r in stored] == ["checkpoint", "state_updated"]
    assert stored[0]["values"] == {"items": [], "title": "", "i": 0}
    assert stored[1]["id"] == event_id and stored[1]["values"] == {"title": "x", "items": ["a"]}
    # The created thread runs like any other.
    assert (await graph.ainvoke({}, thread_id="ghost")).state == Notes(
        items=["a", "w0"], title="x", i=1
    )
    # create=True does not make branches.
    with pytest.raises(
        UnknownThreadError, match=r"^Thread 'ghost' has no history on branch 'side'"
    ):
        await graph.update_state("ghost", {"title": "y"}, branch_id="side", create=True)
    assert await store.last_sequence("ghost", "side") == 0


async def test_update_state_goes_through_reducers_and_replace(store: StateStore) -> None:
    graph = notes_graph(store)
    await graph.ainvoke({"items": ["a"]}, thread_id="t")
    await graph.update_state("t", {"items": ["b"], "title": "t1"})
    assert await graph.load("t") == {"items": ["a", "w0", "b"], "title": "t1", "i": 1}
    event_id = await graph.update_state("t", {"items": Replace(["only"])})
    assert (await records(store, "t"))[-1] == {
        **(await records(store, "t"))[-1],
        "type": "state_updated",
        "id": event_id,
        "values": {"items": ["only"]},
        "replaced": ["items"],
    }
    assert (await notes_graph(reopened(store)).load("t"))["items"] == ["only"]
    # The next run reads the edited state.
    assert (await graph.ainvoke({}, thread_id="t")).state.items == ["only", "w1"]


async def test_update_state_with_an_invalid_value_stores_nothing(store: StateStore) -> None:
    graph = notes_graph(store)
    await graph.ainvoke({}, thread_id="t")
    before = await records(store, "t")
    with pytest.raises(
        StateUpdateError, match=r"^Field 'i' got an invalid value from 'update_state': Input should"
    ) as caught:
        await graph.update_state("t", {"i": "not a number"})
    assert (caught.value.field, caught.value.writer) == ("i", "update_state")
    with pytest.raises(StateUpdateError, match="'update_state' wrote 'nope', which is not a field"):
        await graph.update_state("t", {"nope": 1})
    assert await records(store, "t") == before


async def test_update_state_with_a_state_instance_replaces_every_field(store: StateStore) -> None:
    graph = notes_graph(store)
    await graph.ainvoke({"items": ["a"], "title": "x"}, thread_id="t")
    await graph.update_state("t", Notes(items=["z"], title="new", i=9))
    assert await graph.load("t") == {"items": ["z"], "title": "new", "i": 9}


# -- fork and branches -----------------------------------------------------------------------


async def test_fork_returns_a_branch_record_and_a_branch_that_starts_with_a_checkpoint(
    store: StateStore,
) -> None:
    graph = notes_graph(store)
    first = await graph.ainvoke({"items": ["a"]}, thread_id="t")
    await graph.ainvoke({"items": ["b"]}, thread_id="t")
    from_seq = next(e.sequence for e in await graph.history("t") if e.id == first.checkpoint_id)
    before = time.time()
    branch = await graph.fork("t", from_=first.checkpoint_id, name="alt")
    assert isinstance(branch, BranchRecord)
    assert (branch.id, branch.thread_id, branch.parent_id) == ("alt", "t", "main")
    assert (branch.from_event_id, branch.from_sequence) == (first.checkpoint_id, from_seq)
    assert before - 1 <= branch.created_at <= time.time() + 1

    stored = await records(reopened(store), "t", "alt")
    assert len(stored) == 1 and stored[0]["type"] == "checkpoint"
    assert stored[0]["seq"] == from_seq + 1 and stored[0]["branch"] == "alt"
    assert stored[0]["values"] == {"items": ["a", "w0"], "title": "", "i": 1}
    assert await graph.load("t", branch_id="alt") == await graph.load("t", at=first.checkpoint_id)
    assert await graph.branches("t") == [branch]
    assert await notes_graph(reopened(store)).branches("t") == [branch]


async def test_fork_name_taken_raises_graph_config_error_and_stores_nothing(
    store: StateStore,
) -> None:
    graph = notes_graph(store)
    result = await graph.ainvoke({}, thread_id="t")
    await graph.fork("t", from_=result.checkpoint_id, name="alt")
    await graph.ainvoke({"items": ["on alt"]}, thread_id="t", branch_id="alt")
    before = await records(store, "t", "alt")
    with pytest.raises(GraphConfigError, match=r"^Thread 't' already has a branch 'alt'"):
        await graph.fork("t", from_=result.checkpoint_id, name="alt")
    with pytest.raises(GraphConfigError, match="other than 'main', got 'main'"):
        await graph.fork("t", from_=result.checkpoint_id, name="main")
    with pytest.raises(
        GraphConfigError, match="must be a non-blank string other than 'main', got '  '"
    ):
        await graph.fork("t", from_=result.checkpoint_id, name="  ")
    assert await records(reopened(store), "t", "alt") == before
    assert [b.id for b in await graph.branches("t")] == ["alt"]


async def test_fork_without_a_name_gets_a_random_branch_id(store: StateStore) -> None:
    graph = notes_graph(store)
    result = await graph.ainvoke({}, thread_id="t")
    ids = {(await graph.fork("t", from_=result.checkpoint_id)).id for _ in range(20)}
    assert len(ids) == 20 and "main" not in ids
    assert all(isinstance(i, str) and len(i) >= 8 for i in ids)
    assert {b.id for b in await graph.branches("t")} == ids


async def test_fork_of_an_unknown_event_raises_unknown_thread_error(store: StateStore) -> None:
    graph = notes_graph(store)
    result = await graph.ainvoke({}, thread_id="t")
    await graph.ainvoke({}, thread_id="u")
    with pytest.raises(UnknownThreadError, match=r"^Thread 't' has no event '"):
        await graph.fork("t", from_=str(uuid.uuid4()))
    with pytest.raises(
        UnknownThreadError, match=f"^Thread 'u' has no event '{result.checkpoint_id}'"
    ):
        await graph.fork("u", from_=result.checkpoint_id)  # t's event, not u's
    with pytest.raises(
        UnknownThreadError, match=f"^Thread 'nobody' has no event '{result.checkpoint_id}'"
    ):
        await graph.fork("nobody", from_=result.checkpoint_id)
    assert await graph.branches("t") == [] and await graph.branches("u") == []


async def test_a_fork_of_a_fork_names_its_parent_and_sequences_continue(store: StateStore) -> None:
    graph = notes_graph(store)
    first = await graph.ainvoke({}, thread_id="t")
    await graph.fork("t", from_=first.checkpoint_id, name="b1")
    on_b1 = await graph.ainvoke({"title": "b1"}, thread_id="t", branch_id="b1")
    b2 = await graph.fork("t", from_=on_b1.checkpoint_id, name="b2")
    assert b2.parent_id == "b1"
    on_b2 = await graph.ainvoke({"title": "b2"}, thread_id="t", branch_id="b2")
    assert on_b2.state == Notes(items=["w0", "w1", "w2"], title="b2", i=3)
    for branch in ("main", "b1", "b2"):
        seqs = [r["seq"] for r in await records(store, "t", branch)]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert (await records(store, "t", "b2"))[0]["seq"] == b2.from_sequence + 1
    # get_state at an event reports the branch the event is on.
    assert (await graph.get_state("t", at=on_b1.checkpoint_id)).branch_id == "b1"
    assert [b.id for b in await graph.branches("t")] == ["b1", "b2"]


async def test_fork_leaves_the_original_branch_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "fork.jsonl"
    store = FilesystemStateStore(path)
    graph = notes_graph(store)
    first = await graph.ainvoke({"items": ["a"]}, thread_id="t")
    await graph.ainvoke({"items": ["b"]}, thread_id="t")
    file_before = path.read_bytes()
    main_before = await records(store, "t")

    branch = await graph.fork("t", from_=first.checkpoint_id)
    await graph.ainvoke({"items": ["c"]}, thread_id="t", branch_id=branch.id)
    await graph.update_state("t", {"title": "edited"}, branch_id=branch.id)
    await graph.fork("t", from_=first.checkpoint_id, name="second")

    file_after = path.read_bytes()
    assert file_after.startswith(file_before)  # appended only; no byte before it changed
    main_lines = [line for line in file_after.splitlines() if b'"branch":"main"' in line]
    assert main_lines == [line for line in file_before.splitlines() if b'"branch":"main"' in line]
    again = open_file(path)
    assert await records(again, "t") == main_before
    assert await notes_graph(again).load("t") == {
        "items": ["a", "w0", "b", "w1"],
        "title": "",
        "i": 2,
    }
    await store.aclose()


async def test_fork_leaves_the_original_branch_unchanged_in_memory() -> None:
    store = InMemoryStateStore()
    graph = notes_graph(store)
    first = await graph.ainvoke({"items": ["a"]}, thread_id="t")
    await graph.ainvoke({"items": ["b"]}, thread_id="t")
    before = await records(store, "t")
    branch = await graph.fork("t", from_=first.checkpoint_id)
    await graph.ainvoke({"items": ["c"]}, thread_id="t", branch_id=branch.id)
    assert await records(store, "t") == before


# -- the sync forms ------------------------------------------------------------------------


@pytest.mark.parametrize("in_a_loop", [False, True], ids=["no_loop", "inside_a_loop"])
def test_the_sync_forms_answer_as_the_async_methods_do(
    store: StateStore, anyio_backend: str, in_a_loop: bool
) -> None:
    """Each ``*_sync`` method, called from plain sync code or from inside a running event loop
    (where it runs the method on a worker thread), against the async method on ``anyio_backend``."""
    graph = notes_graph(store)
    result = graph.invoke({"title": "x"}, thread_id="t")
    first = result.checkpoint_id

    def sync_calls() -> dict[str, Any]:
        branch = graph.fork_sync("t", from_=first, name="b")
        return {
            "update": graph.update_state_sync("t", {"items": ["u"]}, branch_id="b"),
            "exists": (graph.exists_sync("t"), graph.exists_sync("t", branch_id="nope")),
            "history": [e.id for e in graph.history_sync("t", branch_id="b")],
            "load": (graph.load_sync("t", branch_id="b"), graph.load_sync("t", at=first)),
            "state": graph.get_state_sync("t", branch_id="b"),
            "branches": (branch, graph.branches_sync("t")),
        }

    async def run_sync_calls() -> dict[str, Any]:
        return sync_calls()

    sync = anyio.run(run_sync_calls, backend=anyio_backend) if in_a_loop else sync_calls()

    async def async_calls() -> dict[str, Any]:
        branch = (await graph.branches("t"))[0]
        return {
            "update": (await graph.history("t", branch_id="b")).events[-1].id,
            "exists": (await graph.exists("t"), await graph.exists("t", branch_id="nope")),
            "history": [e.id for e in await graph.history("t", branch_id="b")],
            "load": (await graph.load("t", branch_id="b"), await graph.load("t", at=first)),
            "state": await graph.get_state("t", branch_id="b"),
            "branches": (branch, await graph.branches("t")),
        }

    assert sync == anyio.run(async_calls, backend=anyio_backend)
    assert sync["exists"] == (True, False)
    assert sync["load"] == ({"items": ["w0", "u"], "title": "x", "i": 1}, result.data)
    assert sync["state"].value == Notes(items=["w0", "u"], title="x", i=1)
    assert [b.id for b in sync["branches"][1]] == ["b"]
    with pytest.raises(UnknownThreadError, match=r"^Thread 'ghost' has no history\."):
        graph.get_state_sync("ghost")


# -- the record envelope, checkpoints, time travel ------------------------------------------


async def test_every_record_has_a_uuid4_id_a_timestamp_and_a_contiguous_sequence(
    store: StateStore,
) -> None:
    graph = loop_graph(store, 60)
    started = time.time()
    result = await graph.ainvoke({}, thread_id="t")
    await graph.update_state("t", {"title": "x"})
    branch = await graph.fork("t", from_=result.checkpoint_id)
    await graph.ainvoke({"title": "y", "i": 59}, thread_id="t", branch_id=branch.id)
    ended = time.time()
    all_ids: list[str] = []
    for branch_id in ("main", branch.id):
        stored = await records(reopened(store), "t", branch_id)
        first = stored[0]["seq"]
        assert [r["seq"] for r in stored] == list(range(first, first + len(stored)))
        for record in stored:
            assert uuid.UUID(record["id"]).version == 4
            assert str(uuid.UUID(record["id"])) == record["id"]
            assert type(record["ts"]) is float and started - 1 <= record["ts"] <= ended + 1
            assert (record["thread"], record["branch"]) == ("t", branch_id)
            all_ids.append(record["id"])
    assert (await records(store, "t"))[0]["seq"] == 1
    assert len(all_ids) == len(set(all_ids))


@pytest.fixture(params=["memory", "filesystem"])
def counting_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    store = make_counting_store(request.param, tmp_path)
    yield store
    anyio.run(store.aclose)


def _checkpoint_gaps(stored: list[Record]) -> list[int]:
    """The number of records between consecutive checkpoints (and after the last one)."""
    gaps, count = [], 0
    for record in stored[1:]:
        if record["type"] == "checkpoint":
            gaps.append(count)
            count = 0
        else:
            count += 1
    return [*gaps, count]


async def test_a_checkpoint_opens_a_thread_and_follows_every_50_records(
    counting_store: Any,
) -> None:
    graph = loop_graph(counting_store, 70)
    await graph.ainvoke({}, thread_id="t")
    for n in range(40):  # update_state counts like any other record
        await graph.update_state("t", {"title": f"edit {n}"})
    await graph.ainvoke({"i": 0}, thread_id="t")
    stored = await records(counting_store, "t")
    assert stored[0]["type"] == "checkpoint" and stored[0]["seq"] == 1
    gaps = _checkpoint_gaps(stored)
    assert gaps[:-1] == [50] * (len(gaps) - 1) and 0 <= gaps[-1] < 50
    assert len(gaps) >= 4
    # Each checkpoint holds the full position at that point.
    for record in stored:
        if record["type"] == "checkpoint" and record["seq"] > 1:
            state = await graph.load("t", at=record["id"])
            previous = stored[record["seq"] - 2]
            assert state == await graph.load("t", at=previous["id"])
            assert record["values"] == state


async def test_a_load_never_replays_more_than_50_records(counting_store: Any) -> None:
    graph = loop_graph(counting_store, 130)
    result = await graph.ainvoke({}, thread_id="t")
    stored = await records(counting_store, "t")
    middle = stored[len(stored) // 2]
    branch = await graph.fork("t", from_=middle["id"], name="late")
    await graph.ainvoke({"i": 0}, thread_id="t", branch_id=branch.id)
    forked = await records(counting_store, "t", "late")
    assert len(forked) > 120
    counting_store.read_sizes.clear()
    for record in [*stored, *forked]:
        await graph.get_state("t", at=record["id"])
        await graph.load("t", at=record["id"])
    await graph.get_state("t")
    await graph.get_state("t", branch_id="late")
    await graph.ainvoke({"i": 129}, thread_id="t")  # a run loads its thread too
    assert counting_store.read_sizes, "the wrapper saw no reads"
    assert max(counting_store.read_sizes) <= 51
    assert result.state.i == 130


async def test_load_at_every_event_equals_the_live_state_at_that_point(store: StateStore) -> None:
    fail = [True]

    @node
    def step(state: Work) -> dict:
        return {"log": [f"s{len(state.log)}"]}

    @node
    def side(state: Work) -> dict:
        if fail:
            raise RuntimeError("side fails once")
        return {"note": f"side saw {len(state.log)}"}

    @node(goto=[step, side])
    def fan(state: Work) -> Command:
        return Command(update={"log": ["fan"]}, goto=[step, side])

    def again(state: Work) -> bool:
        return len(state.log) < 8

    graph = Graph(Work, state_store=store).flow(
        START >> fan, step >> when(again, fan, otherwise=END), side >> END
    )
    live: list[tuple[str | None, dict[str, Any]]] = []
    with pytest.raises(RuntimeError, match="side fails once"):
        async for event in graph.astream({"log": ["in"]}, thread_id="t", stream_mode="values"):
            live.append((event.checkpoint_id, event.data))
    fail.clear()
    async for event in graph.astream(None, thread_id="t", stream_mode="values"):
        if event.mode == "values":
            live.append((event.checkpoint_id, event.data))
    assert len(live) >= 8

    by_id = dict(live)
    expected: dict[str, Any] = {"log": ["in"], "note": ""}
    stored = await records(reopened(store), "t")
    checked = 0
    for record in stored[1:]:
        if record["id"] in by_id:
            expected = by_id[record["id"]]
            checked += 1
        assert await graph.load("t", at=record["id"]) == expected, record
    assert checked == len(live)
    assert expected == await graph.load("t")


# -- refused without a store, and edits a paused superstep would lose -----------------------


def test_continuing_without_a_store_is_refused_instead_of_starting_from_defaults() -> None:
    graph = notes_graph(None)
    with pytest.raises(GraphConfigError, match=r"^invoke\(None\) continues a stored thread"):
        graph.invoke(None)
    with pytest.raises(GraphConfigError, match=r"^ainvoke\(None\) continues a stored thread"):
        anyio.run(graph.ainvoke, None)
    with pytest.raises(GraphConfigError, match=r"^stream\(None\) continues a stored thread"):
        graph.stream(None, stream_mode=[])


def test_a_forked_branch_without_a_store_is_refused() -> None:
    graph = notes_graph(None)
    with pytest.raises(
        GraphConfigError, match=r"^invoke\(branch_id='typo'\) runs on a forked branch"
    ):
        graph.invoke({}, branch_id="typo")
    with pytest.raises(GraphConfigError, match=r"^astream\(branch_id='x'\)"):
        graph.astream({}, branch_id="x", stream_mode=[])
    assert graph.invoke({}, branch_id="main").state.i == 1


class Shelf(BaseState):
    items: Annotated[list[str], add] = Field(default_factory=list)
    note: str = ""


def shelf_graph(store: StateStore, finished_writes: dict[str, Any]) -> Graph[Shelf]:
    @node
    def finished(state: Shelf) -> dict:
        return finished_writes

    @node
    def ask(state: Shelf) -> dict:
        return {"note": str(interrupt("ok?", id="ok"))}

    @node(goto=[finished, ask])
    def fan(state: Shelf) -> Command:
        return Command(goto=[finished, ask])

    return Graph(Shelf, state_store=store).flow(START >> fan, finished >> END, ask >> END)


async def test_appending_to_a_field_a_finished_task_replaced_is_refused(store: StateStore) -> None:
    graph = shelf_graph(store, {"items": Replace(["restocked"])})
    await graph.ainvoke({"items": ["old"]}, thread_id="t")
    with pytest.raises(
        InvalidUpdateError, match=r"'finished' wrote it with Replace\(\.\.\.\), which the merge"
    ) as caught:
        await graph.update_state("t", {"items": ["edit"]})
    assert (caught.value.field, caught.value.writers) == ("items", ("finished", "update_state"))
    result = await graph.ainvoke(None, thread_id="t", resume=Resume("yes"))
    assert result.state == Shelf(items=["restocked"], note="yes")


async def test_appending_to_a_field_a_finished_task_appended_to_is_applied(
    store: StateStore,
) -> None:
    graph = shelf_graph(store, {"items": ["restocked"]})
    await graph.ainvoke({"items": ["old"]}, thread_id="t")
    await graph.update_state("t", {"items": ["edit"]})
    result = await graph.ainvoke(None, thread_id="t", resume=Resume("yes"))
    assert result.state == Shelf(items=["old", "edit", "restocked"], note="yes")
