"""Stored records that parse but cannot be decoded name their file, line and byte offset.

A line of a format 1 or 2 file has no checksum, so a renamed key or a value of the wrong
type in it is only found when the engine decodes the record; so is a record another program
wrote with a valid checksum. Either way the load, the state history, a fork or a run raises
``StateStoreError`` starting ``"<path>: line <n> (byte <offset>)"``, as the error about a
line that does not parse does, with ``path``, ``line`` and ``offset`` set.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import anyio
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    FilesystemStateStore,
    Graph,
    InMemoryStateStore,
    add,
    node,
)
from nodestep._errors import StateStoreError
from nodestep.store import StateStore, _codec
from nodestep.store._index import RecordIndex

DATA = Path(__file__).resolve().parents[1] / "data"
FIXTURE_V2 = DATA / "history_v2.jsonl"

Mutation = Callable[[dict[str, Any]], None]


def _import_graphs() -> ModuleType:
    # tests/data is no package of the test tree: import the module from its file.
    spec = importlib.util.spec_from_file_location("v1_graphs", DATA / "v1_graphs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["v1_graphs"] = module  # pydantic resolves the state classes' annotations here
    spec.loader.exec_module(module)
    return module


v1_graphs = sys.modules.get("v1_graphs") or _import_graphs()


class Meeting(BaseState):
    when: datetime = datetime(2024, 1, 1)
    count: int = 0
    notes: Annotated[list[str], add] = Field(default_factory=list)


@node
def book(state: Meeting) -> dict[str, Any]:
    return {"when": datetime(2024, 2, 28, 10), "count": state.count + 1, "notes": ["booked"]}


def meetings(store: StateStore) -> Graph[Meeting]:
    return Graph(Meeting, state_store=store).flow(START >> book, book >> END)


# -- writing damaged files -----------------------------------------------------------------


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def _write(path: Path, lines: list[bytes]) -> None:
    """Write ``lines``, each batch line made to announce the lines after it as they are now."""
    for i, line in enumerate(lines):
        sealed = _codec.CHECK in line
        record = orjson.loads(line[: line.index(_codec.CHECK)] + b"}" if sealed else line)
        if record.get("type") == "batch" and "bytes" in record:  # not an event made one
            group = [b + b"\n" for b in lines[i + 1 : i + 1 + record["lines"]]]
            if sealed:
                lines[i] = _codec.batch_line(group)[:-1]
            else:
                size = sum(map(len, group))
                lines[i] = orjson.dumps({"type": "batch", "lines": len(group), "bytes": size})
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def damage(path: Path, thread: str, seq: int, mutate: Mutation) -> tuple[int, int]:
    """Change the record ``seq`` of ``thread`` (main branch) in the file, as another program
    would: a line with a checksum gets a valid one. Return the line's number and offset."""
    lines = _lines(path)
    for i, line in enumerate(lines[1:], start=1):
        record, sealed = _codec.parse_line(line, 0, len(line))
        ours = record.get("thread") == thread and record.get("seq") == seq
        if ours and record.get("type") != "branch" and record["branch"] == "main":
            mutate(record)
            lines[i] = _encode(record, sealed)
            _write(path, lines)
            return i + 1, sum(len(b) + 1 for b in lines[:i])
    raise AssertionError(f"no record {seq} of thread {thread!r} in {path}")


def _encode(record: dict[str, Any], sealed: bool) -> bytes:
    if sealed:
        return _codec.encode_event(record)[:-1]
    if record.get("branch") == "main":
        del record["branch"]  # as format 2 wrote it
    return orjson.dumps(record)


def as_version_2(path: Path) -> None:
    """Rewrite a file of this release as format 2 did: no checksums, every type written."""
    lines = _lines(path)
    out = [_codec.header_start(2) + b"1700000000.0}"]
    for line in lines[1:]:
        record, _ = _codec.parse_line(line, 0, len(line))
        out.append(_encode(record, sealed=False))
    _write(path, out)


@pytest.fixture(params=[2, 3], ids=["format-2", "format-3"])
def meeting_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """Thread ``m-1`` of ``meetings``, two turns (records 1 to 7), in a file of the format."""
    path = tmp_path / "history.jsonl"

    async def write() -> None:
        store = FilesystemStateStore(path)
        graph = meetings(store)
        await graph.ainvoke({"notes": ["a"]}, thread_id="m-1")
        await graph.ainvoke({"notes": ["b"]}, thread_id="m-1")
        await store.aclose()

    anyio.run(write)
    if request.param == 2:
        as_version_2(path)
    return path


def rename(key: str) -> Mutation:
    def mutate(record: dict[str, Any]) -> None:
        record[key + "z"] = record.pop(key)

    return mutate


def drop(key: str) -> Mutation:
    def mutate(record: dict[str, Any]) -> None:
        del record[key]

    return mutate


def set_value(value: Any, *keys: str) -> Mutation:
    def mutate(record: dict[str, Any]) -> None:
        target = record
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return mutate


def _at_last_event(call: Callable[[Graph[Any], str, str], Awaitable[Any]]) -> Any:
    async def run(graph: Graph[Any], thread: str) -> Any:
        events = (await graph.history(thread)).events
        return await call(graph, thread, events[-1].id)

    return run


READS: dict[str, Callable[[Graph[Any], str], Awaitable[Any]]] = {
    "load": lambda graph, thread: graph.load(thread),
    "get_state": lambda graph, thread: graph.get_state(thread),
    "state_history": lambda graph, thread: graph.state_history(thread),
    "load(at=)": _at_last_event(lambda graph, thread, at: graph.load(thread, at)),
    "fork": _at_last_event(lambda graph, thread, at: graph.fork(thread, from_=at)),
    "update_state": lambda graph, thread: graph.update_state(thread, {"notes": ["c"]}),
    "ainvoke": lambda graph, thread: graph.ainvoke({"notes": ["c"]}, thread_id=thread),
}


def read_raises_at(
    path: Path, read: str, line: int, offset: int, graph_of: Callable[[StateStore], Graph[Any]]
) -> StateStoreError:
    """Run ``read`` on thread ``m-1`` and check that it names ``path``, ``line``, ``offset``."""

    async def run() -> StateStoreError:
        store = FilesystemStateStore(path)
        try:
            with pytest.raises(StateStoreError, match=re.escape(place)) as info:
                await READS[read](graph_of(store), thread)
        finally:
            await store.aclose()
        return info.value

    place = f"{path}: line {line} (byte {offset}): "
    thread = "m-1" if graph_of is meetings else "chain"
    error = anyio.run(run)
    assert (error.path, error.line, error.offset) == (str(path), line, offset)
    return error


# -- each damage, each way of reading ------------------------------------------------------

DAMAGES: dict[str, tuple[int, Mutation, str]] = {
    "renamed 'values' of a checkpoint": (1, rename("values"), "no key 'values'"),
    "missing 'status' of a checkpoint": (1, drop("status"), "no key 'status'"),
    "a count that is no int": (
        1,
        set_value("many", "values", "count"),
        "field 'count' does not fit its type int",
    ),
    "renamed 'step' of a superstep": (6, rename("step"), "no key 'step'"),
    "an impossible date": (
        3,
        set_value("2024-02-30T10:00:00", "tasks", "book", "update", "when"),
        "field 'when' does not fit its type datetime",
    ),
    "a step that is no number": (3, set_value("zero", "step"), "wrong type or form"),
}


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("damaged", DAMAGES)
def test_a_record_that_cannot_be_decoded_names_its_file_line_and_offset(
    meeting_file: Path, damaged: str, read: str
) -> None:
    seq, mutate, what = DAMAGES[damaged]
    line, offset = damage(meeting_file, "m-1", seq, mutate)
    error = read_raises_at(meeting_file, read, line, offset, meetings)
    assert what in str(error)
    assert "thread 'm-1'" in str(error) or "Thread 'm-1'" in str(error)


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize(
    ("seq", "key"), [(1, "values"), (3, "node")], ids=["checkpoint", "superstep"]
)
def test_a_renamed_key_in_a_file_an_earlier_release_wrote_names_its_line(
    tmp_path: Path, read: str, seq: int, key: str
) -> None:
    path = tmp_path / "history.jsonl"
    shutil.copyfile(FIXTURE_V2, path)
    line, offset = damage(path, "chain", seq, rename(key))
    error = read_raises_at(path, read, line, offset, lambda s: v1_graphs.build("chain", s))
    assert f"no key '{key}'" in str(error)


def test_the_error_keeps_pydantics_error_as_its_cause(meeting_file: Path) -> None:
    _, mutate, _ = DAMAGES["an impossible date"]
    line, offset = damage(meeting_file, "m-1", 3, mutate)
    error = read_raises_at(meeting_file, "load", line, offset, meetings)
    assert type(error.__cause__).__name__ == "ValidationError"
    assert "Thread 'm-1' (branch 'main') cannot be loaded: its event 3" in str(error)


def test_a_step_of_the_wrong_type_keeps_the_error_that_showed_it_as_its_cause(
    meeting_file: Path,
) -> None:
    line, offset = damage(meeting_file, "m-1", 3, set_value("zero", "step"))
    error = read_raises_at(meeting_file, "get_state", line, offset, meetings)
    assert isinstance(error.__cause__, TypeError)


def test_a_place_is_counted_in_a_file_of_several_threads(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    shutil.copyfile(FIXTURE_V2, path)
    line, offset = damage(path, "counter", 103, rename("values"))  # its last checkpoint
    store = FilesystemStateStore(path)
    with pytest.raises(StateStoreError, match=re.escape(f"{path}: line {line} (byte {offset})")):
        anyio.run(v1_graphs.build("counter", store).load, "counter")
    assert path.read_bytes()[offset:].startswith(b'{"type":"checkpoint"')
    anyio.run(store.aclose)


@pytest.mark.anyio
async def test_a_store_without_places_raises_the_error_naming_the_record() -> None:
    store = InMemoryStateStore()
    graph = meetings(store)
    await graph.ainvoke({"notes": ["a"]}, thread_id="m-1")
    assert await store.describe_record("m-1", "main", 1) is None
    [checkpoint] = await store.read("m-1", "main", stop=1)
    del checkpoint["status"]
    # As if stored so: the memory store's index keeps each record's line.
    store._index.branches[("m-1", "main")].locations[0] = _codec.encode_event(checkpoint)
    with pytest.raises(StateStoreError, match="record 1 of thread 'm-1', branch 'main'") as info:
        await meetings(store).load("m-1")  # a new graph: no cached state
    assert (info.value.path, info.value.line, info.value.offset) == (None, None, None)


@pytest.mark.anyio
async def test_the_file_store_describes_where_each_record_is(meeting_file: Path) -> None:
    store = FilesystemStateStore(meeting_file)
    data = meeting_file.read_bytes()
    for seq in range(1, 8):
        place = await store.describe_record("m-1", "main", seq)
        assert place is not None
        assert data.count(b"\n", 0, place.offset) == place.line - 1
        assert data[place.offset - 1 : place.offset] == b"\n"
        [record] = await store.read("m-1", "main", start=seq, stop=seq)
        line = data[place.offset :].split(b"\n", 1)[0]
        assert _codec.parse_line(line, 0, len(line))[0]["id"] == record["id"]
        assert str(place) == f"{meeting_file}: line {place.line} (byte {place.offset})"
    assert await store.describe_record("m-1", "main", 8) is None
    assert await store.describe_record("m-2", "main", 1) is None
    await store.aclose()


# -- any damage: a valid history, or an error that names the line ----------------------------

_EVENT_LINES = [
    i
    for i, line in enumerate(FIXTURE_V2.read_bytes().split(b"\n")[:-1])
    if i and _codec.parse_line(line, 0, len(line))[0].get("type") not in ("batch", "branch")
]
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from(["", "x", "step_a", "2024-02-30T10:00:00", 1.5]),
    st.just([]),
    st.just({}),
    st.just(["x"]),
    st.just({"x": 1}),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path into ``value``'s dicts and lists, ``prefix`` first."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*prefix, i))


@st.composite
def mutations(draw: st.DrawFn) -> tuple[int, bytes]:
    """A line of the fixture, and that line with one key renamed or dropped, or one value."""
    index = draw(st.sampled_from(_EVENT_LINES))
    line = FIXTURE_V2.read_bytes().split(b"\n")[index]
    record = orjson.loads(line)
    where = draw(st.sampled_from([p for p in _paths(record) if p]))
    parent = record
    for key in where[:-1]:
        parent = parent[key]
    last = where[-1]
    how = draw(st.sampled_from(["rename", "drop", "value"]))
    if where == ("type",) and how == "value":
        # Not a list or a dict: see test_an_unhashable_type_in_a_line_is_a_precise_error.
        parent[last] = draw(st.sampled_from(["x", 3, None, "branch", "batch", "checkpoint"]))
    elif how == "value" or isinstance(parent, list):
        parent[last] = draw(_VALUES)
    elif how == "rename":
        parent[f"{last}z"] = parent.pop(last)
    else:
        del parent[last]
    return index, orjson.dumps(record)


@pytest.mark.slow
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(mutation=mutations())
def test_every_changed_record_reads_as_a_history_or_names_its_line(
    tmp_path: Path, mutation: tuple[int, bytes]
) -> None:
    index, changed = mutation
    path = tmp_path / "history.jsonl"
    lines = _lines(FIXTURE_V2)
    thread = orjson.loads(lines[index]).get("thread")
    branch = orjson.loads(lines[index]).get("branch", "main")
    lines[index] = changed
    _write(path, lines)
    data = path.read_bytes()

    async def read() -> None:
        store = FilesystemStateStore(path, read_only=True)
        try:
            graph = v1_graphs.build(v1_graphs.THREADS[thread], store)
            await graph.load(thread, branch_id=branch)
            await graph.get_state(thread, branch_id=branch)
            await graph.history(thread, branch_id=branch)
            await graph.state_history(thread, branch_id=branch)
        finally:
            await store.aclose()

    try:
        anyio.run(read)
    except StateStoreError as error:  # any other exception fails the test
        if "has records but no checkpoint" in str(error):
            # Known gap: a branch whose first record lost its checkpoint type is found by
            # the index, which names the thread, branch and record, but not the line yet.
            return
        assert error.path == str(path), error
        assert error.line is not None and error.offset is not None, error
        assert f"{path}: line {error.line} (byte {error.offset})" in str(error)
        assert data.count(b"\n", 0, error.offset) == error.line - 1, error


def test_an_unhashable_type_in_a_line_is_a_precise_error(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    shutil.copyfile(FIXTURE_V2, path)
    line, offset = damage(path, "chain", 3, set_value([], "type"))
    with pytest.raises(StateStoreError, match=re.escape(f"{path}: line {line} (byte {offset})")):
        FilesystemStateStore(path)


def test_the_index_says_an_unhashable_type_is_no_string() -> None:
    record = {"type": [], "id": "e1", "seq": 1, "ts": 1.0, "thread": "t", "branch": "main"}
    problem = RecordIndex().add_stored(record, (0, 1))
    assert problem == "in an event record, its 'type' must be a string, found []"
