"""Damaged history files: every damaged record is a StateStoreError naming file, line, offset.

Format 3 gives every line a CRC-32 checksum, so a plausible flip (a digit changed inside a
value, a renamed key) is reported instead of loaded, whether the store finds it when it
indexes the file or when it reads a line back after another program changed it in place.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodestep import END, START, BaseState, FilesystemStateStore, Graph, node
from nodestep._errors import StateStoreError
from nodestep.testing import checkpoint, event, fork, seqs


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "history.jsonl"


class Counter(BaseState):
    n: int = 0


@node
def count(state: Counter) -> dict[str, int]:
    return {"n": state.n + 1}


def counter_graph(store: FilesystemStateStore) -> Graph[Counter]:
    return Graph(Counter, state_store=store).flow(START >> count, count >> END)


def write_history(path: Path) -> bytes:
    """Run two threads a few turns each and fork one; return the file's bytes."""
    store = FilesystemStateStore(path)
    graph = counter_graph(store)
    for _ in range(3):
        for thread in ("t1", "t2"):
            graph.invoke({"n": 100}, thread_id=thread)
    first = graph.history_sync("t1").events[1]
    graph.fork_sync("t1", from_=first.id, name="alt")
    graph.invoke({"n": 7}, thread_id="t1", branch_id="alt")
    anyio.run(store.aclose)
    return path.read_bytes()


def line_and_offset(data: bytes, index: int) -> tuple[int, int]:
    """The 1-based line holding ``data[index]``, and where that line starts."""
    start = data.rfind(b"\n", 0, index) + 1
    return data.count(b"\n", 0, start) + 1, start


def assert_names_the_place(error: StateStoreError, path: Path, line: int, offset: int) -> None:
    assert (error.path, error.line, error.offset) == (str(path), line, offset)
    assert f"{path}: line {line} (byte {offset})" in str(error)


# -- the checksum --------------------------------------------------------------------------


def test_every_line_after_the_header_ends_with_its_checksum(path: Path) -> None:
    lines = write_history(path).splitlines()
    assert orjson.loads(lines[0])["version"] == 3
    assert all(re.fullmatch(rb'\{.*, "c":"[A-Za-z0-9+/]{6}"\}', line) for line in lines[1:])


def test_a_digit_changed_inside_a_value_is_found_by_the_checksum(path: Path) -> None:
    data = write_history(path)
    at = data.index(b'"n":101') + len(b'"n":10')  # 101 -> 109: still valid JSON
    path.write_bytes(data[:at] + b"9" + data[at + 1 :])
    with pytest.raises(StateStoreError, match="its checksum does not match its bytes") as info:
        FilesystemStateStore(path)
    line, offset = line_and_offset(data, at)
    assert_names_the_place(info.value, path, line, offset)
    assert re.search(r"\(expected b'.{6}', found b'.{6}'\)", str(info.value))
    assert "restore it from a backup" in str(info.value)


@pytest.mark.parametrize(
    ("old", "new"),
    [(b'"values"', b'"valuez"'), (b'"tasks"', b'"taskz"'), (b'"step":0', b'"step":7')],
    ids=["renamed-values", "renamed-tasks", "other-step"],
)
def test_a_renamed_key_or_changed_number_is_refused_when_the_file_is_opened(
    path: Path, old: bytes, new: bytes
) -> None:
    data = write_history(path)
    at = data.rindex(old)
    path.write_bytes(data[:at] + new + data[at + len(old) :])
    with pytest.raises(StateStoreError, match="checksum does not match") as info:
        FilesystemStateStore(path)
    assert_names_the_place(info.value, path, *line_and_offset(data, at))


def test_bytes_changed_under_an_open_store_are_refused_when_read(path: Path) -> None:
    data = write_history(path)
    store = FilesystemStateStore(path)
    graph = counter_graph(store)
    at = data.rindex(b'"n":101') + len(b'"n":10')
    with path.open("r+b") as f:  # in place: the file's size and the store's index hold
        f.seek(at)
        f.write(b"8")
    with pytest.raises(StateStoreError, match="changed on the disk after this store") as info:
        graph.get_state_sync("t2")
    assert_names_the_place(info.value, path, *line_and_offset(data, at))
    anyio.run(store.aclose)


def test_a_digit_changed_after_the_store_read_the_line_is_found_on_the_next_read(
    path: Path,
) -> None:
    # The store has indexed and read the line; a later write into the file (same size) is
    # seen by its change time, and from then on every read checks the checksums again.
    data = write_history(path)
    store = FilesystemStateStore(path)
    before = anyio.run(lambda: store.read("t2", "main"))
    at = data.rindex(b'"n":101') + len(b'"n":10')
    with path.open("r+b") as f:
        f.seek(at)
        f.write(b"8")
    with pytest.raises(StateStoreError, match="its checksum does not match its bytes") as info:
        anyio.run(lambda: store.read("t2", "main"))
    assert_names_the_place(info.value, path, *line_and_offset(data, at))
    with path.open("r+b") as f:  # put the byte back: the line reads as before
        f.seek(at)
        f.write(b"1")
    assert anyio.run(lambda: store.read("t2", "main")) == before
    anyio.run(store.aclose)


def test_a_line_made_invalid_json_under_an_open_store_is_refused_when_read(path: Path) -> None:
    data = write_history(path)
    store = FilesystemStateStore(path)
    at = data.rindex(b'"thread":"t2"')
    with path.open("r+b") as f:
        f.seek(at)
        f.write(b"{")
    with pytest.raises(StateStoreError, match="is not a valid record") as info:
        anyio.run(lambda: store.read("t2", "main"))
    assert_names_the_place(info.value, path, *line_and_offset(data, at))
    anyio.run(store.aclose)


@pytest.mark.anyio
async def test_a_line_without_its_checksum_after_checked_lines_is_refused(path: Path) -> None:
    store = FilesystemStateStore(path)
    await store.append("t1", "main", [event(1)], after=0)
    await store.append("t1", "main", [event(2)], after=1)
    await store.aclose()
    lines = path.read_bytes().splitlines(keepends=True)
    record = orjson.loads(lines[2][: -len(b', "c":"123456"}\n')] + b"}")
    lines[2] = orjson.dumps(record) + b"\n"  # the same record, its checksum cut off
    path.write_bytes(b"".join(lines))
    with pytest.raises(StateStoreError, match="expected a checksum at its end") as info:
        FilesystemStateStore(path)
    assert_names_the_place(info.value, path, 3, len(lines[0]) + len(lines[1]))


@pytest.mark.anyio
async def test_a_record_with_its_own_key_named_like_the_checksum_reads_back(path: Path) -> None:
    store = FilesystemStateStore(path)
    records = [{**event(1), "c": "AAAAAA"}, {**event(2, type="superstep_completed"), "c": 5}]
    await store.append("t1", "main", records, after=0)
    await store.aclose()
    again = FilesystemStateStore(path)
    assert await again.read("t1", "main") == records
    await again.aclose()


@pytest.mark.anyio
async def test_superstep_records_are_stored_without_their_type_and_read_with_it(
    path: Path,
) -> None:
    store = FilesystemStateStore(path)
    record = {"type": "superstep_completed", **event(1, type="superstep_completed")}
    await store.append("t1", "main", [record], after=0)
    await store.aclose()
    line = path.read_bytes().splitlines()[1]
    assert b'"type"' not in line and b'"branch"' not in line
    again = FilesystemStateStore(path)
    assert await again.read("t1", "main") == [record]
    await again.aclose()


def test_records_without_checksums_are_read_from_a_version_2_file(path: Path) -> None:
    header = b'{"type":"header","format":"nodestep-history","version":2,"created":1.5}\n'
    records = [event(1), event(2)]
    path.write_bytes(header + b"".join(orjson.dumps(r) + b"\n" for r in records))
    store = FilesystemStateStore(path)
    assert anyio.run(lambda: store.read("t1", "main")) == records
    anyio.run(store.aclose)


def test_a_header_version_that_is_not_a_positive_integer_is_refused(path: Path) -> None:
    for version in (b"0", b"-2"):
        header = b'{"type":"header","format":"nodestep-history","version":' + version + b"}\n"
        path.write_bytes(header)
        words = f"format version {int(version)}, which is not a positive integer"
        with pytest.raises(StateStoreError, match=words) as info:
            FilesystemStateStore(path)
        assert (info.value.path, info.value.line, info.value.offset) == (str(path), 1, 0)


# -- fuzzing -------------------------------------------------------------------------------


_history: dict[str, Any] = {}


def valid_history(tmp: Path) -> tuple[bytes, dict[tuple[str, str], list[dict[str, Any]]]]:
    """A valid file of several threads and a fork, and each branch's records; made once."""
    if not _history:
        source = tmp / "source.jsonl"
        data = write_history(source)
        store = FilesystemStateStore(source)
        branches = [("t1", "main"), ("t2", "main"), ("t1", "alt")]
        _history["data"] = data
        _history["records"] = {b: anyio.run(lambda b=b: store.read(*b)) for b in branches}
        anyio.run(store.aclose)
    return _history["data"], _history["records"]


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with bytes flipped, a key renamed, or a value's type changed."""
    how = draw(st.sampled_from(["flip", "rename", "retype"]))
    if how == "flip":
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(0, len(out) - 1))
            out[at] = draw(st.integers(0, 255))
        return bytes(out)
    if how == "rename":
        keys = sorted(set(re.findall(rb'"([a-z_]+)":', data)))
        key = draw(st.sampled_from(keys))
        spots = [m.start() for m in re.finditer(b'"' + key + b'":', data)]
        at = draw(st.sampled_from(spots)) + 1
        return data[:at] + key[:-1] + b"z" + data[at + len(key) :]
    numbers = [m.start() for m in re.finditer(rb":(\d+)[,}]", data)]
    at = draw(st.sampled_from(numbers)) + 1
    end = at + len(re.match(rb"\d+", data[at:]).group())  # type: ignore[union-attr]
    value = draw(st.sampled_from([b'"1"', b"null", b"[]", b"1.5", b"true"]))
    return data[:at] + value + data[end:]


@pytest.mark.slow
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_damage_is_a_precise_error_or_a_prefix_of_the_history(
    tmp_path: Path, data: st.DataObject
) -> None:
    good, records = valid_history(tmp_path)
    path = tmp_path / "damaged.jsonl"
    bad = data.draw(damaged(good), label="file")
    path.write_bytes(bad)

    async def load() -> None:
        store = FilesystemStateStore(path)
        try:
            graph = counter_graph(store)
            for (thread, branch), want in records.items():
                got = await store.read(thread, branch)
                assert got == want[: len(got)], "not a prefix of the history"
                if got:
                    state = await graph.get_state(thread, branch_id=branch)
                    assert state.sequence == len(got) + want[0]["seq"] - 1
        finally:
            await store.aclose()

    try:
        anyio.run(load)
    except StateStoreError as error:
        assert error.path == str(path), error
        assert error.line is not None and error.offset is not None, error
        if error.line > 1:  # errors about the header are about line 1 at byte 0
            assert f"line {error.line} (byte {error.offset})" in str(error)


def test_a_branch_record_is_checked_too(path: Path) -> None:
    store = FilesystemStateStore(path)
    first = event(1)
    anyio.run(lambda: store.append("t1", "main", [first], after=0))
    anyio.run(lambda: store.create_branch(fork("t1", "alt", first), [checkpoint(2, branch="alt")]))
    anyio.run(store.aclose)
    data = path.read_bytes()
    at = data.index(b'"from_seq":1') + len(b'"from_seq":')
    path.write_bytes(data[:at] + b"0" + data[at + 1 :])
    with pytest.raises(StateStoreError, match="checksum does not match") as info:
        FilesystemStateStore(path)
    assert_names_the_place(info.value, path, *line_and_offset(data, at))
    assert seqs([first]) == [1]
