"""The persistence contract: every example of the user docs runs and prints what it shows,
and every row of its "Rules and defaults" table holds.

The examples are kept verbatim as strings (a formatter must not touch them) and executed
in a fresh namespace with stdout captured. Each rules row has a test named after it; a row
that involves a store runs against ``InMemoryStateStore`` and ``FilesystemStateStore``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import fcntl
import functools
import io
import json
import os
import threading
import time
import uuid
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel, Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    FilesystemStateStore,
    Graph,
    GraphConfigError,
    GraphExecutionError,
    GraphTimeoutError,
    InMemoryStateStore,
    InvalidUpdateError,
    NodeContext,
    Resume,
    ResumeError,
    RunLimitExceededError,
    StateStoreError,
    UnknownThreadError,
    add,
    interrupt,
    node,
    when,
)
from nodestep.state import dump_json_object
from nodestep.store import StateStore
from store_helpers import counting_store, open_file, reopened
from store_helpers import records as raw_records
from store_helpers import records_sync as raw_records_sync

# -- the examples, verbatim ------------------------------------------------------------

OPENING_CODE = """\
from typing import Annotated

from pydantic import Field

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, add, node


class Poll(BaseState):
    votes: Annotated[list[str], add] = Field(default_factory=list)
    count: int = 0


@node
def tally(state: Poll) -> dict:
    return {"count": len(state.votes)}


graph = Graph(Poll, state_store=InMemoryStateStore()).flow(
    START >> tally,
    tally >> END,
)

graph.invoke({"votes": ["yes"]}, thread_id="poll-1")
print(graph.invoke({"votes": ["no"]}, thread_id="poll-1").state)
print(graph.invoke({"votes": ["no"]}, thread_id="poll-2").state)
"""

OPENING_OUTPUT = """\
votes=['yes', 'no'] count=2
votes=['no'] count=1
"""


FILESYSTEM_CODE = """\
import asyncio
import tempfile
from pathlib import Path
from typing import Annotated

from pydantic import Field

from nodestep import END, START, BaseState, FilesystemStateStore, Graph, add, node


class Poll(BaseState):
    votes: Annotated[list[str], add] = Field(default_factory=list)
    count: int = 0


@node
def tally(state: Poll) -> dict:
    return {"count": len(state.votes)}


async def main(directory: Path) -> None:
    store = FilesystemStateStore(directory / "threads" / "polls.jsonl")
    graph = Graph(Poll, state_store=store).flow(START >> tally, tally >> END)

    await graph.ainvoke({"votes": ["yes"]}, thread_id="poll-1")
    result = await graph.ainvoke({"votes": ["no"]}, thread_id="poll-1")
    print(result.state)

    reopened = Graph(Poll, state_store=FilesystemStateStore(store.path))
    reopened.flow(START >> tally, tally >> END)
    print((await reopened.get_state("poll-1")).value)


with tempfile.TemporaryDirectory() as directory:
    asyncio.run(main(Path(directory)))
"""

FILESYSTEM_OUTPUT = """\
votes=['yes', 'no'] count=2
votes=['yes', 'no'] count=2
"""


TIME_TRAVEL_CODE = """\
import asyncio
from typing import Annotated

from pydantic import Field

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, add, node


class Poll(BaseState):
    votes: Annotated[list[str], add] = Field(default_factory=list)
    count: int = 0


@node
def tally(state: Poll) -> dict:
    return {"count": len(state.votes)}


graph = Graph(Poll, state_store=InMemoryStateStore()).flow(
    START >> tally,
    tally >> END,
)


async def main() -> None:
    await graph.ainvoke({"votes": ["yes"]}, thread_id="poll-1")
    await graph.ainvoke({"votes": ["no"]}, thread_id="poll-1")

    history = await graph.history("poll-1")
    first_turn = next(
        event for event in history.events if event.type == "run_completed"
    )
    print(await graph.load("poll-1", at=first_turn.id))

    branch = await graph.fork("poll-1", from_=first_turn.id, name="recount")
    result = await graph.ainvoke(
        {"votes": ["maybe"]}, thread_id="poll-1", branch_id=branch.id
    )
    print(branch.id, result.state.votes)
    print("main", (await graph.get_state("poll-1")).value.votes)


asyncio.run(main())
"""

TIME_TRAVEL_OUTPUT = """\
{'votes': ['yes'], 'count': 1}
recount ['yes', 'maybe']
main ['yes', 'no']
"""


CONTINUE_CODE = """\
from nodestep import END, START, BaseState, Command, Graph, InMemoryStateStore, node


class Trip(BaseState):
    flight: str = ""
    hotel: str = ""


hotel_service = {"up": False}


@node
async def book_flight(state: Trip) -> dict:
    print("book_flight runs")
    return {"flight": "LH 1234"}


@node
async def book_hotel(state: Trip) -> dict:
    print("book_hotel runs")
    if not hotel_service["up"]:
        raise ConnectionError("the hotel service is down")
    return {"hotel": "Hotel Adler"}


@node(goto=[book_flight, book_hotel])
def plan(state: Trip) -> Command:
    return Command(goto=[book_flight, book_hotel])


graph = Graph(Trip, state_store=InMemoryStateStore()).flow(
    START >> plan,
    book_flight >> END,
    book_hotel >> END,
)

try:
    graph.invoke({}, thread_id="trip-1")
except ConnectionError as error:
    print("failed:", error)

hotel_service["up"] = True
result = graph.invoke(None, thread_id="trip-1")
print(result.status, result.state)
"""

CONTINUE_OUTPUT = """\
book_flight runs
book_hotel runs
failed: the hotel service is down
book_hotel runs
completed flight='LH 1234' hotel='Hotel Adler'
"""


EDIT_PAUSED_CODE = """\
import asyncio

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    InMemoryStateStore,
    InvalidUpdateError,
    Resume,
    interrupt,
    node,
)


class Offer(BaseState):
    price: int = 0
    note: str = ""


@node
def quote(state: Offer) -> dict:
    return {"price": 100}


@node
def review(state: Offer) -> dict:
    answer = interrupt({"note": state.note}, id="review")
    return {"note": f"{answer}, after reading {state.note!r}"}


@node(goto=[quote, review])
def start(state: Offer) -> Command:
    return Command(goto=[quote, review])


graph = Graph(Offer, state_store=InMemoryStateStore()).flow(
    START >> start,
    quote >> END,
    review >> END,
)


async def main() -> None:
    await graph.ainvoke({}, thread_id="offer-1")
    try:
        await graph.update_state("offer-1", {"price": 90})
    except InvalidUpdateError:
        print("price: refused, quote already wrote it")
    await graph.update_state("offer-1", {"note": "check the discount"})
    result = await graph.ainvoke(None, thread_id="offer-1", resume=Resume("approved"))
    print(result.state)


asyncio.run(main())
"""

EDIT_PAUSED_OUTPUT = """\
price: refused, quote already wrote it
price=100 note="approved, after reading 'check the discount'"
"""


EXAMPLES = {
    "opening": (OPENING_CODE, OPENING_OUTPUT),
    "filesystem": (FILESYSTEM_CODE, FILESYSTEM_OUTPUT),
    "time_travel": (TIME_TRAVEL_CODE, TIME_TRAVEL_OUTPUT),
    "continue_unfinished_superstep": (CONTINUE_CODE, CONTINUE_OUTPUT),
    "edit_paused_thread": (EDIT_PAUSED_CODE, EDIT_PAUSED_OUTPUT),
}


def run_example(code: str, name: str) -> str:
    """Execute ``code`` as a fresh module and return what it printed."""
    namespace: dict[str, Any] = {"__name__": f"seed_example_{name}"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        # dont_inherit: this module's `from __future__ import annotations` must not leak in.
        exec(compile(code, f"<seed example {name}>", "exec", dont_inherit=True), namespace)
    return out.getvalue()


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_example_prints_exactly_what_the_document_shows(name: str) -> None:
    code, expected = EXAMPLES[name]
    assert run_example(code, name) == expected


def test_example_continue_runs_the_failed_task_only() -> None:
    # The document's claim, counted rather than read off the printout.
    output = run_example(CONTINUE_CODE, "count")
    assert Counter(output.splitlines())["book_flight runs"] == 1
    assert Counter(output.splitlines())["book_hotel runs"] == 2


# -- stores and graphs for the rules ------------------------------------------------------

STORE_KINDS = ["memory", "filesystem"]


def new_store(kind: str, tmp_path: Path) -> StateStore:
    if kind == "memory":
        return InMemoryStateStore()
    return FilesystemStateStore(tmp_path / "history" / "threads.jsonl")


class Poll(BaseState):
    votes: Annotated[list[str], add] = Field(default_factory=list)
    count: int = 0


@node
def tally(state: Poll) -> dict:
    return {"count": len(state.votes)}


def poll_graph(store: StateStore | None = None) -> Graph[Poll]:
    return Graph(Poll, state_store=store).flow(START >> tally, tally >> END)


class Trip(BaseState):
    flight: str = ""
    hotel: str = ""
    log: Annotated[list[str], add] = Field(default_factory=list)


class TripSwitches:
    def __init__(self) -> None:
        self.hotel_down = False
        self.hotel_hangs = False
        self.calls: Counter[str] = Counter()


def trip_graph(store: StateStore, switches: TripSwitches, **graph_options: Any) -> Graph[Trip]:
    """plan fans out to book_flight and book_hotel; the hotel can fail or hang."""

    @node
    async def book_flight(state: Trip) -> dict:
        switches.calls["book_flight"] += 1
        return {"flight": "LH 1234", "log": ["flight"]}

    @node
    async def book_hotel(state: Trip) -> dict:
        switches.calls["book_hotel"] += 1
        if switches.hotel_hangs:
            await anyio.sleep(30)  # real time: what a graph's timeout must cut short
        if switches.hotel_down:
            raise ConnectionError("the hotel service is down")
        return {"hotel": "Hotel Adler", "log": ["hotel"]}

    @node(goto=[book_flight, book_hotel])
    def plan(state: Trip) -> Command:
        switches.calls["plan"] += 1
        return Command(update={"log": ["plan"]}, goto=[book_flight, book_hotel])

    graph = Graph(Trip, state_store=store, **graph_options)
    return graph.flow(START >> plan, book_flight >> END, book_hotel >> END)


COMPLETED_TRIP = Trip(flight="LH 1234", hotel="Hotel Adler", log=["plan", "flight", "hotel"])


class Offer(BaseState):
    price: int = 0
    note: str = ""
    tags: Annotated[list[str], add] = Field(default_factory=list)


def offer_graph(store: StateStore, seen: list[str]) -> Graph[Offer]:
    """quote finishes and review pauses, in one superstep."""

    @node
    def quote(state: Offer) -> dict:
        return {"price": 100, "tags": ["quoted"]}

    @node
    def review(state: Offer) -> dict:
        answer = interrupt({"note": state.note}, id="review")
        seen.append(state.note)
        return {"note": f"{answer}: {state.note}"}

    @node(goto=[quote, review])
    def start(state: Offer) -> Command:
        return Command(goto=[quote, review])

    graph = Graph(Offer, state_store=store)
    return graph.flow(START >> start, quote >> END, review >> END)


class Chain(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)


def chain_graph(store: StateStore | None, **graph_options: Any) -> Graph[Chain]:
    @node
    def one(state: Chain) -> dict:
        return {"log": ["one"]}

    @node
    def two(state: Chain) -> dict:
        return {"log": ["two"]}

    @node
    def three(state: Chain) -> dict:
        return {"log": ["three"]}

    graph = Graph(Chain, state_store=store, **graph_options)
    return graph.flow(START >> one, one >> two, two >> three, three >> END)


# -- rules and defaults ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_rule_run_without_a_state_store_starts_from_defaults_and_keeps_nothing() -> None:
    graph = poll_graph()
    first = await graph.ainvoke({"votes": ["yes"]})
    second = await graph.ainvoke({"votes": ["no"]})
    assert first.state == Poll(votes=["yes"], count=1)
    assert second.state == Poll(votes=["no"], count=1)
    assert first.checkpoint_id is None and second.checkpoint_id is None
    # A thread is what a store keeps: naming one without a store is refused, not ignored.
    with pytest.raises(
        GraphConfigError, match=r"^ainvoke\(thread_id='poll-1'\) names a thread to keep, but"
    ):
        await graph.ainvoke({"votes": ["no"]}, thread_id="poll-1")
    with pytest.raises(
        GraphConfigError, match=r"^Graph 'graph' has no state store, so it keeps no"
    ):
        await graph.history(first.thread_id)


def test_rule_run_without_thread_id_and_without_a_store_gets_a_generated_thread_id() -> None:
    graph = poll_graph()
    ids = [graph.invoke({"votes": ["x"]}).thread_id for _ in range(50)]
    assert len(set(ids)) == 50
    for thread_id in ids:
        assert len(thread_id) == 32 and int(thread_id, 16) >= 0
    # A generated id is not a thread anyone can continue: there is no store to keep one.
    with pytest.raises(GraphConfigError, match="has no state store, so a run keeps nothing"):
        graph.invoke({"votes": ["y"]}, thread_id=ids[0])


def test_rule_run_with_a_store_needs_a_thread_id(store: StateStore) -> None:
    graph = poll_graph(store)
    needs_thread = "runs with a state store, so every call needs a thread_id"
    with pytest.raises(GraphConfigError, match=needs_thread):
        graph.invoke({"votes": ["yes"]})
    with pytest.raises(GraphConfigError, match=needs_thread):
        list(graph.stream({"votes": ["yes"]}, stream_mode="values"))
    # The same goes for a store passed to the call only.
    with pytest.raises(GraphConfigError, match=needs_thread):
        poll_graph().invoke({"votes": ["yes"]}, state_store=store)
    if isinstance(store, FilesystemStateStore):
        assert store.path.read_bytes().count(b"\n") == 1  # the header: nothing was stored


@pytest.mark.anyio
async def test_rule_graph_state_store_none_by_default_and_a_call_store_wins(
    store: StateStore, tmp_path: Path
) -> None:
    assert poll_graph().state_store is None
    graphs_own = InMemoryStateStore()
    graph = poll_graph(graphs_own)

    await graph.ainvoke({"votes": ["yes"]}, thread_id="t", state_store=store)
    assert await graphs_own.last_sequence("t", "main") == 0
    assert await graph.exists("t") is False
    assert await graph.exists("t", state_store=store) is True
    assert await graph.load("t", state_store=store) == {"votes": ["yes"], "count": 1}
    await graph.update_state("t", {"votes": ["no"]}, state_store=store)
    assert (await graph.get_state("t", state_store=store)).value.votes == ["yes", "no"]
    assert await graphs_own.last_sequence("t", "main") == 0

    # Without any store the thread methods say what is missing.
    with pytest.raises(GraphConfigError, match=r"no state store, .* Pass state_store=\.\.\."):
        await poll_graph().load("t")


@pytest.mark.anyio
async def test_rule_input_on_an_existing_thread_is_a_patch(store: StateStore) -> None:
    class Form(BaseState):
        items: Annotated[list[str], add] = Field(default_factory=list)
        title: str = ""
        owner: str = ""

    @node
    def keep(state: Form) -> None:
        return None

    graph = Graph(Form, state_store=store).flow(START >> keep, keep >> END)
    await graph.ainvoke({"items": ["a"], "title": "first", "owner": "ann"}, thread_id="f")
    result = await graph.ainvoke({"items": ["b"], "title": "second"}, thread_id="f")
    # add appends, a plain field is replaced, a field left out keeps its value.
    assert result.state == Form(items=["a", "b"], title="second", owner="ann")
    again = Graph(Form, state_store=reopened(store)).flow(START >> keep, keep >> END)
    assert await again.load("f") == result.data


@pytest.mark.anyio
async def test_rule_in_memory_state_store_keeps_history_in_this_process_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = InMemoryStateStore()
    graph = poll_graph(store)
    await graph.ainvoke({"votes": ["yes"]}, thread_id="p")
    assert await graph.load("p") == {"votes": ["yes"], "count": 1}
    # Nothing is written anywhere, and another store (as in another process) knows nothing.
    assert list(tmp_path.iterdir()) == []
    assert await graph.exists("p", state_store=InMemoryStateStore()) is False
    # Records are kept encoded: what a caller gets back is its own copy.
    records = await raw_records(store, "p")
    records[0]["values"]["votes"].append("forged")
    assert (await raw_records(store, "p"))[0]["values"]["votes"] == []


def test_rule_filesystem_state_store_creates_missing_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "c" / "history.jsonl"
    store = FilesystemStateStore(path)
    # Created when the store is created, before anything runs.
    assert path.parent.is_dir() and path.is_file()
    poll_graph(store).invoke({"votes": ["yes"]}, thread_id="p")
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert lines[0]["type"] == "header"
    events = [line for line in lines if line.get("type") not in ("header", "batch", "branch")]
    assert {e["thread"] for e in events} == {"p"} and len(events) == 4
    anyio.run(store.aclose)


@pytest.mark.anyio
async def test_rule_file_header_written_first_and_files_without_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    await FilesystemStateStore(path).aclose()
    header = json.loads(path.read_bytes().splitlines()[0])
    assert header["type"] == "header" and header["format"] == "nodestep-history"

    other = tmp_path / "other.jsonl"
    other.write_text('{"some": "json"}\n')
    before = other.read_bytes()
    with pytest.raises(
        StateStoreError, match="is not a nodestep history file: its first line"
    ) as caught:
        FilesystemStateStore(other)
    assert str(other) in str(caught.value)
    assert other.read_bytes() == before


@pytest.mark.slow
def test_rule_file_locks_a_writer_waits_while_another_holds_the_file(
    tmp_path: Path, anyio_backend: str
) -> None:
    path = tmp_path / "locked.jsonl"
    store = FilesystemStateStore(path)
    graph = poll_graph(store)
    done = threading.Event()
    errors: list[BaseException] = []
    run = functools.partial(graph.ainvoke, {"votes": ["yes"]}, thread_id="p")

    def writer() -> None:
        try:
            # ainvoke on a loop of this thread's own, of each back end: invoke() would
            # leave the thread's private event loop behind, unclosed, when the thread ends.
            anyio.run(run, backend=anyio_backend)
        except BaseException as error:  # reported below
            errors.append(error)
        done.set()

    # Another process's reader holds a shared flock on the file (as the store's readers do).
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        thread = threading.Thread(target=writer)
        thread.start()
        assert not done.wait(0.3), "the writer did not wait for the lock"
        assert path.read_bytes().count(b"\n") == 1  # the header only
        fcntl.flock(fd, fcntl.LOCK_UN)
        assert done.wait(10)
        thread.join()
    finally:
        os.close(fd)
    assert errors == []
    assert anyio.run(open_file(path).last_sequence, "p", "main") == 4
    anyio.run(store.aclose)


@pytest.mark.anyio
async def test_rule_broken_last_line_is_cut_off_and_its_size_reported(tmp_path: Path) -> None:
    path = tmp_path / "torn.jsonl"
    store = FilesystemStateStore(path)
    await poll_graph(store).ainvoke({"votes": ["yes"]}, thread_id="p")
    await store.aclose()
    good = path.read_bytes()
    torn = b'{"type":"run_started","run":"ab","inp'
    path.write_bytes(good + torn)

    again = open_file(path)
    graph = poll_graph(again)
    assert await graph.load("p") == {"votes": ["yes"], "count": 1}
    result = await graph.ainvoke({"votes": ["no"]}, thread_id="p")
    assert result.state == Poll(votes=["yes", "no"], count=2)
    assert again.repaired_bytes == len(torn)
    data = path.read_bytes()
    assert data.startswith(good) and data.endswith(b"\n")
    assert all(json.loads(line) for line in data.splitlines())


@pytest.mark.anyio
async def test_rule_a_complete_record_that_does_not_parse_raises_state_store_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bad.jsonl"
    store = FilesystemStateStore(path)
    await poll_graph(store).ainvoke({"votes": ["yes"]}, thread_id="p")
    await store.aclose()
    good = path.read_bytes()
    path.write_bytes(good + b"this is not json\n")
    line = good.count(b"\n") + 1

    with pytest.raises(
        StateStoreError, match=r"is not a valid record: expected one JSON object"
    ) as caught:
        await poll_graph(open_file(path)).get_state("p")
    error = caught.value
    assert (error.path, error.line, error.offset) == (str(path), line, len(good))
    assert str(path) in str(error) and str(line) in str(error)
    assert path.read_bytes() == good + b"this is not json\n"  # never skipped or cut


@pytest.mark.anyio
async def test_rule_branch_id_defaults_to_main(store: StateStore) -> None:
    graph = poll_graph(store)
    result = await graph.ainvoke({"votes": ["yes"]}, thread_id="p")
    assert result.branch_id == "main"
    assert {r["branch"] for r in await raw_records(store, "p")} == {"main"}
    assert (await graph.history("p")).branch_id == "main"
    assert (await graph.get_state("p")).branch_id == "main"

    fork = await graph.fork("p", from_=result.checkpoint_id, name="side")
    on_side = await graph.ainvoke({"votes": ["side"]}, thread_id="p", branch_id="side")
    assert on_side.branch_id == "side" and fork.parent_id == "main"
    assert await graph.exists("p", branch_id="side") is True
    assert (await graph.load("p", branch_id="side"))["votes"] == ["yes", "side"]
    assert (await graph.history("p", branch_id="side")).branch_id == "side"
    await graph.update_state("p", {"votes": ["edit"]}, branch_id="side")
    assert (await graph.get_state("p", branch_id="side")).value.votes == ["yes", "side", "edit"]
    assert await graph.load("p") == {"votes": ["yes"], "count": 1}


@pytest.mark.anyio
async def test_rule_missing_thread_raises_unknown_thread_error(store: StateStore) -> None:
    graph = poll_graph(store)
    no_history = r"^Thread 'nobody' has no history\."
    with pytest.raises(UnknownThreadError, match=no_history):
        await graph.load("nobody")
    with pytest.raises(UnknownThreadError, match=no_history):
        await graph.get_state("nobody")
    with pytest.raises(UnknownThreadError, match=no_history):
        await graph.update_state("nobody", {"votes": ["x"]})
    assert await graph.exists("nobody") is False

    event_id = await graph.update_state("nobody", {"votes": ["x"]}, create=True)
    assert await graph.load("nobody") == {"votes": ["x"], "count": 0}
    assert (await graph.get_state("nobody")).event_id == event_id


@pytest.mark.anyio
async def test_rule_history_of_a_thread_that_never_ran_is_empty(store: StateStore) -> None:
    history = await poll_graph(store).history("never")
    assert list(history.events) == [] and history.checkpoints == [] and len(history) == 0


@pytest.mark.anyio
async def test_rule_update_state_applies_through_reducers_and_returns_the_event_id(
    store: StateStore,
) -> None:
    graph = poll_graph(store)
    await graph.ainvoke({"votes": ["yes"]}, thread_id="p")
    event_id = await graph.update_state("p", {"votes": ["no"], "count": 7})
    last = (await graph.history("p")).events[-1]
    assert (last.id, last.type) == (event_id, "state_updated")
    assert await poll_graph(reopened(store)).load("p") == {"votes": ["yes", "no"], "count": 7}
    assert await graph.load("p", at=event_id) == {"votes": ["yes", "no"], "count": 7}


@pytest.mark.anyio
async def test_rule_fork_name_none_gives_a_random_id(store: StateStore) -> None:
    graph = poll_graph(store)
    result = await graph.ainvoke({"votes": ["yes"]}, thread_id="p")
    named = await graph.fork("p", from_=result.checkpoint_id, name="recount")
    first = await graph.fork("p", from_=result.checkpoint_id)
    second = await graph.fork("p", from_=result.checkpoint_id)
    assert named.id == "recount"
    assert first.id != second.id and "main" not in {first.id, second.id}
    assert first.id and second.id
    assert [b.id for b in await graph.branches("p")] == ["recount", first.id, second.id]


@pytest.mark.anyio
async def test_rule_edit_of_a_paused_thread_refuses_a_field_a_finished_task_wrote(
    store: StateStore,
) -> None:
    graph = offer_graph(store, [])
    assert (await graph.ainvoke({}, thread_id="o")).status == "interrupted"
    before = await raw_records(store, "o")
    with pytest.raises(
        InvalidUpdateError, match=r"^Field 'price' of thread 'o' was already written by 'quote'"
    ) as caught:
        await graph.update_state("o", {"price": 90})
    assert caught.value.field == "price" and "quote" in caught.value.writers
    assert await raw_records(reopened(store), "o") == before
    # A merging reducer can take the edit.
    await graph.update_state("o", {"tags": ["edited"]})


@pytest.mark.anyio
async def test_rule_other_edits_of_a_paused_thread_are_applied(store: StateStore) -> None:
    seen: list[str] = []
    graph = offer_graph(store, seen)
    await graph.ainvoke({}, thread_id="o")
    await graph.update_state("o", {"note": "check the discount"})
    result = await graph.ainvoke(None, thread_id="o", resume=Resume("approved"))
    assert seen == ["check the discount"]
    # The node's own write to the edited field wins.
    assert result.state == Offer(price=100, note="approved: check the discount", tags=["quoted"])


@pytest.mark.anyio
async def test_rule_load_at_and_fork_leave_the_original_branch_unchanged(store: StateStore) -> None:
    graph = poll_graph(store)
    first = await graph.ainvoke({"votes": ["yes"]}, thread_id="p")
    await graph.ainvoke({"votes": ["no"]}, thread_id="p")
    assert await graph.load("p", at=first.checkpoint_id) == {"votes": ["yes"], "count": 1}
    before = await raw_records(store, "p")

    branch = await graph.fork("p", from_=first.checkpoint_id, name="b")
    await graph.ainvoke({"votes": ["maybe"]}, thread_id="p", branch_id="b")
    await graph.update_state("p", {"votes": ["later"]}, branch_id="b")

    assert await raw_records(reopened(store), "p") == before
    assert (await graph.load("p"))["votes"] == ["yes", "no"]
    assert (await graph.load("p", branch_id="b"))["votes"] == ["yes", "maybe", "later"]
    assert branch.from_event_id == first.checkpoint_id


@pytest.mark.anyio
async def test_rule_what_a_fork_continues_an_unfinished_superstep(store: StateStore) -> None:
    switches = TripSwitches()
    switches.hotel_down = True
    graph = trip_graph(store, switches)
    with pytest.raises(ConnectionError, match=r"^the hotel service is down$"):
        await graph.ainvoke({}, thread_id="trip")
    failed_at = (await graph.history("trip")).events[-1]
    assert failed_at.type == "run_failed"
    branch = await graph.fork("trip", from_=failed_at.id, name="retry")
    switches.hotel_down = False
    result = await graph.ainvoke(None, thread_id="trip", branch_id=branch.id)
    assert result.state == COMPLETED_TRIP
    assert switches.calls == Counter(plan=1, book_flight=1, book_hotel=2)
    assert (await graph.get_state("trip")).status == "failed"  # main still waits


@pytest.mark.anyio
async def test_rule_what_a_fork_continues_resume_answers_a_pause(store: StateStore) -> None:
    graph = offer_graph(store, [])
    paused = await graph.ainvoke({}, thread_id="o")
    branch = await graph.fork("o", from_=paused.checkpoint_id)
    result = await graph.ainvoke(None, thread_id="o", branch_id=branch.id, resume=Resume("ok"))
    assert result.status == "completed" and result.state.note == "ok: "
    assert (await graph.get_state("o")).status == "paused"


@pytest.mark.anyio
async def test_rule_what_a_fork_continues_new_input_starts_a_new_turn(store: StateStore) -> None:
    graph = poll_graph(store)
    first = await graph.ainvoke({"votes": ["yes"]}, thread_id="p")
    await graph.ainvoke({"votes": ["no"]}, thread_id="p")
    branch = await graph.fork("p", from_=first.checkpoint_id)
    result = await graph.ainvoke({"votes": ["maybe"]}, thread_id="p", branch_id=branch.id)
    assert result.state == Poll(votes=["yes", "maybe"], count=2)
    started = [e for e in await graph.history("p", branch_id=branch.id) if e.type == "run_started"]
    assert started[-1].data["input"] == {"votes": ["maybe"]}


async def _stop_node_failure(graph_for: Any, store: StateStore, switches: TripSwitches) -> Graph:
    switches.hotel_down = True
    graph = graph_for()
    with pytest.raises(ConnectionError, match=r"^the hotel service is down$"):
        await graph.ainvoke({}, thread_id="trip")
    switches.hotel_down = False
    return graph


async def _stop_max_steps(graph_for: Any, store: StateStore, switches: TripSwitches) -> Graph:
    graph = graph_for(max_steps=1)
    with pytest.raises(RunLimitExceededError, match=r"max_steps=1 .* it stopped before step 1"):
        await graph.ainvoke({}, thread_id="trip")
    return graph


async def _stop_timeout(graph_for: Any, store: StateStore, switches: TripSwitches) -> Graph:
    switches.hotel_hangs = True
    graph = graph_for(timeout=0.05)
    with pytest.raises(
        GraphTimeoutError, match=r"timeout=0\.05s inside supersteps; it stopped in step 1"
    ):
        await graph.ainvoke({}, thread_id="trip")
    switches.hotel_hangs = False
    return graph


async def _stop_stream_closed(graph_for: Any, store: StateStore, switches: TripSwitches) -> Graph:
    graph = graph_for()
    events = graph.astream({}, thread_id="trip", stream_mode="updates")
    assert (await events.__anext__()).node == "plan"
    await events.aclose()
    return graph


STOPS = {
    "node_fails": _stop_node_failure,
    "max_steps": _stop_max_steps,
    "timeout": _stop_timeout,
    "stream_closed": _stop_stream_closed,
}


@pytest.mark.parametrize("stop", STOPS.values(), ids=list(STOPS))
@pytest.mark.anyio
async def test_rule_when_a_superstep_stays_unfinished(store: StateStore, stop: Any) -> None:
    switches = TripSwitches()

    def graph_for(**options: Any) -> Graph[Trip]:
        return trip_graph(store, switches, **options)

    graph = await stop(graph_for, store, switches)
    snapshot = await trip_graph(reopened(store), switches).get_state("trip")
    # A failure says so; next leaves out book_flight where it finished before the stop.
    assert (snapshot.status, snapshot.next) == {
        "_stop_node_failure": ("failed", ("book_hotel",)),
        "_stop_max_steps": ("failed", ("book_flight", "book_hotel")),
        "_stop_timeout": ("failed", ("book_hotel",)),
        "_stop_stream_closed": ("running", ("book_flight", "book_hotel")),
    }[stop.__name__]
    assert snapshot.value.log == ["plan"]
    result = await graph.ainvoke(None, thread_id="trip")
    assert result.state == COMPLETED_TRIP
    assert switches.calls["book_flight"] == 1 and switches.calls["plan"] == 1


def test_rule_invoke_none_continues_an_unfinished_superstep_and_never_starts_a_turn(
    store: StateStore,
) -> None:
    switches = TripSwitches()
    switches.hotel_down = True
    graph = trip_graph(store, switches)
    with pytest.raises(ConnectionError, match=r"^the hotel service is down$"):
        graph.invoke({}, thread_id="trip")
    switches.hotel_down = False
    continued = trip_graph(reopened(store), switches).invoke(None, thread_id="trip")
    assert continued.state == COMPLETED_TRIP
    assert switches.calls == Counter(plan=1, book_flight=1, book_hotel=2)
    # The thread is complete now: invoke(None) does not start it over.
    with pytest.raises(
        ResumeError, match=r"^Thread 'trip' has no unfinished superstep: its last run"
    ):
        graph.invoke(None, thread_id="trip")
    assert switches.calls["plan"] == 1
    started = [e for e in graph.history_sync("trip") if e.type == "run_started"]
    assert "input" not in started[-1].data and "tasks" not in started[-1].data


def test_rule_invoke_none_on_a_paused_thread_raises_resume_error(store: StateStore) -> None:
    graph = offer_graph(store, [])
    graph.invoke({}, thread_id="o")
    before = raw_records_sync(store, "o")
    with pytest.raises(
        ResumeError, match=r"^Thread 'o' is paused, .* answer with resume=Resume\(\.\.\.\)\.$"
    ) as caught:
        graph.invoke(None, thread_id="o")
    assert caught.value.pending == ("review:review",)
    assert raw_records_sync(store, "o") == before


def test_rule_invoke_none_on_a_completed_thread_raises_resume_error(store: StateStore) -> None:
    graph = poll_graph(store)
    graph.invoke({"votes": ["yes"]}, thread_id="p")
    before = raw_records_sync(store, "p")
    with pytest.raises(ResumeError, match="pass input to start a new turn"):
        graph.invoke(None, thread_id="p")
    assert raw_records_sync(store, "p") == before


def test_rule_invoke_none_after_a_failed_superstep_whose_writes_cannot_be_merged(
    store: StateStore,
) -> None:
    class Answer(BaseState):
        answer: str = ""

    @node
    def left(state: Answer) -> dict:
        return {"answer": "left"}

    @node
    def right(state: Answer) -> dict:
        return {"answer": "right"}

    @node(goto=[left, right])
    def split(state: Answer) -> Command:
        return Command(goto=[left, right])

    graph = Graph(Answer, state_store=store).flow(START >> split, left >> END, right >> END)
    two_writers = "^Field 'answer' got writes from 'left', 'right' in step 1"
    with pytest.raises(InvalidUpdateError, match=two_writers):
        graph.invoke({}, thread_id="a")
    assert graph.get_state_sync("a").status == "blocked"
    with pytest.raises(ResumeError, match="that superstep's writes cannot be merged"):
        graph.invoke(None, thread_id="a")
    # New input is still a way out: a new turn.
    with pytest.raises(InvalidUpdateError, match=two_writers):
        graph.invoke({"answer": "again"}, thread_id="a")


def test_rule_invoke_none_on_a_missing_thread_raises_unknown_thread_error(
    store: StateStore,
) -> None:
    with pytest.raises(
        UnknownThreadError, match=r"^Thread 'missing' has no history to continue; pass input"
    ) as caught:
        poll_graph(store).invoke(None, thread_id="missing")
    assert caught.value.thread_id == "missing"
    assert anyio.run(store.last_sequence, "missing", "main") == 0


def test_rule_new_input_on_a_paused_thread_raises_resume_error(store: StateStore) -> None:
    graph = offer_graph(store, [])
    graph.invoke({}, thread_id="o")
    before = raw_records_sync(store, "o")
    with pytest.raises(ResumeError, match="or fork the thread at an earlier event") as caught:
        graph.invoke({"note": "new"}, thread_id="o")
    assert caught.value.pending == ("review:review",)
    assert raw_records_sync(store, "o") == before


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Stamp(BaseModel):
    who: str
    when: dt.datetime


class Typed(BaseState):
    stamp: Stamp | None = None
    stamps: Annotated[list[Stamp], add] = Field(default_factory=list)
    at: dt.datetime | None = None
    day: dt.date | None = None
    uid: uuid.UUID | None = None
    price: Decimal = Decimal("0")
    color: Color = Color.RED
    pair: tuple[int, str] = (0, "")
    tags: set[str] = Field(default_factory=set)


@pytest.mark.anyio
async def test_rule_stored_form_is_json_and_comes_back_as_the_same_types(store: StateStore) -> None:
    when_ = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC)

    @node
    def stamp(state: Typed) -> dict:
        return {"stamp": Stamp(who="node", when=when_), "stamps": [Stamp(who="n", when=when_)]}

    graph = Graph(Typed, state_store=store).flow(START >> stamp, stamp >> END)
    uid = uuid.uuid4()
    live = (
        await graph.ainvoke(
            {
                "at": dt.datetime(2024, 1, 2, 3, 4, 5),
                "day": dt.date(2024, 1, 1),
                "uid": uid,
                "price": Decimal("1.10"),
                "color": Color.BLUE,
                "pair": (1, "a"),
                "tags": {"x", "y"},
            },
            thread_id="typed",
        )
    ).state
    records = await raw_records(reopened(store), "typed")
    stored_input = next(r for r in records if r["type"] == "run_started")["input"]
    assert stored_input["at"] == "2024-01-02T03:04:05" and stored_input["uid"] == str(uid)
    assert stored_input["pair"] == [1, "a"] and stored_input["color"] == "blue"
    step = next(r for r in records if r["type"] == "superstep_completed")
    stored_update = step["tasks"]["stamp"]["update"]
    assert stored_update["stamp"] == {"who": "node", "when": "2024-05-06T07:08:09Z"}

    again = Graph(Typed, state_store=reopened(store)).flow(START >> stamp, stamp >> END)
    value = (await again.get_state("typed")).value
    assert value == live
    assert type(value.stamp) is Stamp and type(value.stamps[0]) is Stamp
    assert value.stamp.when == when_ and value.stamp.when.tzinfo is not None
    assert type(value.at) is dt.datetime and type(value.day) is dt.date
    assert type(value.uid) is uuid.UUID and type(value.price) is Decimal
    assert value.color is Color.BLUE and value.pair == (1, "a") and value.tags == {"x", "y"}


class Loose(BaseState):
    ratio: float = 0.0
    anything: Any = None
    log: Annotated[list[str], add] = Field(default_factory=list)


NO_FLOAT = r"^Field 'ratio' holds a float that JSON cannot store \(nan or infinity\)"
NO_ROUND_TRIP = "^Field 'anything' does not survive a JSON round trip: a value of type {}"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        pytest.param({"ratio": float("nan")}, NO_FLOAT, id="nan"),
        pytest.param({"ratio": float("inf")}, NO_FLOAT, id="inf"),
        pytest.param(
            {"anything": object()},
            "^Field 'anything' cannot be stored as JSON: a value of type object has no JSON",
            id="object",
        ),
        pytest.param({"anything": (1, 2)}, NO_ROUND_TRIP.format("tuple"), id="tuple_in_any"),
        pytest.param({"anything": {1: "int key"}}, NO_ROUND_TRIP.format("dict"), id="int_key"),
    ],
)
@pytest.mark.anyio
async def test_rule_values_that_do_not_survive_json_raise_when_written(
    store: StateStore, bad: dict[str, Any], message: str
) -> None:
    writes: dict[str, Any] = {}

    @node
    def write(state: Loose) -> dict:
        return {"log": ["ran"], **writes}

    graph = Graph(Loose, state_store=store).flow(START >> write, write >> END)
    # As input of a new thread: nothing stored at all.
    with pytest.raises(StateStoreError, match=message):
        await graph.ainvoke(bad, thread_id="t")
    assert await graph.exists("t") is False
    # As update_state: refused before anything is appended.
    await graph.ainvoke({}, thread_id="t")
    before = await raw_records(store, "t")
    named = "^update_state on thread 't' got a value it cannot store: " + message[1:]
    with pytest.raises(StateStoreError, match=named):
        await graph.update_state("t", bad)
    assert await raw_records(store, "t") == before
    # As input on an existing thread.
    with pytest.raises(StateStoreError, match=message):
        await graph.ainvoke(bad, thread_id="t")
    assert await raw_records(store, "t") == before
    # As a node's update: the run fails there; the bad value is not in the history.
    writes.update(bad)
    with pytest.raises(StateStoreError, match=message):
        await graph.ainvoke({}, thread_id="t")
    after = await raw_records(reopened(store), "t")
    assert after[-1]["type"] == "run_failed" and after[-1]["error"] == "StateStoreError"
    assert not any("update" in r for r in after[len(before) :])
    assert await graph.load("t") == {"ratio": 0.0, "anything": None, "log": ["ran"]}


class Loop(BaseState):
    i: int = 0
    seen: Annotated[list[int], add] = Field(default_factory=list)


@node
def loop_step(state: Loop) -> dict:
    return {"i": state.i + 1, "seen": [state.i]}


def loop_graph(store: StateStore, steps: int) -> Graph[Loop]:
    graph = Graph(Loop, state_store=store, max_steps=steps + 5)
    return graph.flow(
        START >> loop_step, loop_step >> when(lambda s: s.i < steps, loop_step, otherwise=END)
    )


@pytest.mark.parametrize("kind", STORE_KINDS)
@pytest.mark.anyio
async def test_rule_checkpoints_at_thread_start_and_after_every_50_updates(
    kind: str, tmp_path: Path
) -> None:
    store = counting_store(kind, tmp_path)
    graph = loop_graph(store, 120)
    await graph.ainvoke({}, thread_id="loop")
    records = await raw_records(store, "loop")
    checkpoints = [r["seq"] for r in records if r["type"] == "checkpoint"]
    assert records[0]["type"] == "checkpoint"
    assert checkpoints == list(range(1, len(records) + 1, 51))
    assert len(checkpoints) == 3  # 1 + 1 + 120 + 1 records with two checkpoints among them
    store.read_sizes.clear()
    for record in records:
        await graph.load("loop", at=record["id"])
    await graph.load("loop")
    assert store.read_sizes, "the wrapper saw no reads"
    assert max(store.read_sizes) <= 51  # a checkpoint and at most 50 records to replay
    await store.aclose()


@pytest.mark.anyio
async def test_rule_history_records_get_uuid4_ids_timestamps_and_sequence_numbers(
    store: StateStore,
) -> None:
    graph = trip_graph(store, TripSwitches())
    started = time.time()
    await graph.ainvoke({}, thread_id="trip")
    await graph.update_state("trip", {"log": ["edit"]})
    await graph.ainvoke({}, thread_id="trip")
    ended = time.time()
    records = await raw_records(reopened(store), "trip")
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    ids = [r["id"] for r in records]
    assert len(set(ids)) == len(ids)
    for record in records:
        parsed = uuid.UUID(record["id"])
        assert parsed.version == 4 and str(parsed) == record["id"]
        assert isinstance(record["ts"], float) and started - 1 <= record["ts"] <= ended + 1
    assert [r["ts"] for r in records] == sorted(r["ts"] for r in records)


@pytest.mark.anyio
async def test_rule_json_key_order(store: StateStore) -> None:
    assert dump_json_object({"b": 1, "a": {"d": 2, "c": 3}}) == '{"a":{"c":3,"d":2},"b":1}'
    assert dump_json_object({"b": 1, "a": 2}, sort_keys=False) == '{"b":1,"a":2}'

    class Ordered(BaseState):
        zeta: dict[str, int] = Field(default_factory=dict)
        alpha: int = 0

    @node
    def noop(state: Ordered) -> None:
        return None

    graph = Graph(Ordered, state_store=store).flow(START >> noop, noop >> END)
    await graph.ainvoke({"zeta": {"z": 1, "a": 2}, "alpha": 1}, thread_id="o")
    records = await raw_records(reopened(store), "o")
    assert list(records[0]["values"]) == ["zeta", "alpha"]
    assert list(records[1]["input"]) == ["zeta", "alpha"]
    assert list(records[1]["input"]["zeta"]) == ["z", "a"]
    if isinstance(store, FilesystemStateStore):
        raw = store.path.read_text()
        assert '"input":{"zeta":{"z":1,"a":2},"alpha":1}' in raw


@pytest.mark.anyio
async def test_rule_context_is_never_stored(store: StateStore) -> None:
    secret = "sk-live-5f1d0c9a"

    @node
    def use(state: Chain, ctx: NodeContext) -> dict:
        return {"log": [f"used {len(ctx.context['api_key'])} chars"]}

    @node
    def ask(state: Chain, ctx: NodeContext) -> dict:
        assert ctx.context["api_key"] == secret
        return {"log": [interrupt("go?", id="go")]}

    graph = Graph(Chain, state_store=store).flow(START >> use, use >> ask, ask >> END)
    context = {"api_key": secret}
    await graph.ainvoke({}, thread_id="c", context=context)
    await graph.ainvoke(None, thread_id="c", resume=Resume("yes"), context=context)
    records = await raw_records(reopened(store), "c")
    assert secret not in json.dumps(records)
    assert "api_key" not in json.dumps(records)
    if isinstance(store, FilesystemStateStore):
        assert secret.encode() not in store.path.read_bytes()
    assert (await graph.load("c"))["log"] == ["used 16 chars", "yes"]


def _rename_graph(store: StateStore, name: str, fail: list[bool]) -> Graph[Chain]:
    @node
    def first(state: Chain) -> dict:
        return {"log": ["first"]}

    def approve(state: Chain) -> dict:
        if fail:
            raise RuntimeError("approve fails")
        return {"log": [interrupt("ok?", id="ok")]}

    second = node(approve, name=name)
    return Graph(Chain, state_store=store).flow(START >> first, first >> second, second >> END)


@pytest.mark.parametrize("waiting", ["paused", "unfinished"])
def test_rule_node_names_are_the_stored_identity(store: StateStore, waiting: str) -> None:
    fail = [True] if waiting == "unfinished" else []
    graph = _rename_graph(store, "approve", fail)
    if waiting == "paused":
        assert graph.invoke({}, thread_id="n").status == "interrupted"
    else:
        with pytest.raises(RuntimeError, match="approve fails"):
            graph.invoke({}, thread_id="n")
    fail.clear()
    renamed = _rename_graph(reopened(store), "sign_off", fail)
    with pytest.raises(
        GraphExecutionError, match="waits on node 'approve', which graph 'graph' does"
    ):
        if waiting == "paused":
            renamed.invoke(None, thread_id="n", resume=Resume("yes"))
        else:
            renamed.invoke(None, thread_id="n")
    # Under its old name the node continues the thread (a resume's answer, once given, is
    # kept: the failed resumed run is an unfinished superstep like any other).
    restored = _rename_graph(reopened(store), "approve", fail)
    result = restored.invoke(None, thread_id="n")
    if waiting == "paused":
        assert result.state.log == ["first", "yes"]
    else:
        assert result.status == "interrupted"
