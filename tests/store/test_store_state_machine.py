"""Model-based test: the file store and the memory store agree after any sequence of operations.

A hypothesis state machine drives an ``InMemoryStateStore`` (the verified fake) and a
``FilesystemStateStore`` side by side with random appends (some holding checkpoints),
appends with a stale ``after``, forks, reopening the file, and torn writes: bytes a crashed
writer left at the file's end, with or without a reopen after them. A plain model (the
records appended, per thread and branch) checks that both give back what they were given.

After every step both stores must answer every query the same: ``read`` (whole and a range)
of every branch, ``last_sequence``, ``last_checkpoint`` with and without ``at_or_before``,
``read_tail`` (records or the same error), ``locate`` of every event id, and
``list_branches``. Torn tails must be invisible to readers and cut, counted in
``repaired_bytes``, by exactly the next writer or opener.

The machine runs once per back end. Hypothesis's rules are plain functions, so it stays
sync and runs each store call on a new event loop of that back end.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from nodestep._errors import StateStoreError, ThreadConflictError
from nodestep.store import (
    BranchRecord,
    FilesystemStateStore,
    InMemoryStateStore,
    Record,
    StateStore,
    _codec,
)

T = TypeVar("T")

THREADS = ("t1", "t2", "thread ü")
FORK_NAMES = ("b1", "b2", "b3", "main")  # "main" always exists when forking: refused

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
json_values = st.dictionaries(
    st.text(max_size=4),
    st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
        max_leaves=4,
    ),
    max_size=3,
)
garbage = st.one_of(
    st.binary(min_size=1, max_size=120).map(lambda b: b.replace(b"\n", b"?")),
    st.integers(min_value=1, max_value=4096).map(lambda n: b"\0" * n),  # a zero-filled tail
)


def record(thread: str, branch: str, seq: int, values: dict[str, Any], *, cp: bool) -> Record:
    return {
        "id": str(uuid.uuid4()),
        "seq": seq,
        "ts": time.time(),
        "thread": thread,
        "branch": branch,
        "type": "checkpoint" if cp else "state_updated",
        "values": values,
    }


async def outcome(coro: Coroutine[Any, Any, T]) -> T | tuple[str, str]:
    """Return the call's result, or its error's type and message (stores must agree on both)."""
    try:
        return await coro
    except StateStoreError as e:
        return (type(e).__name__, str(e))


class StoresAgree(RuleBasedStateMachine):
    def __init__(self, backend: str) -> None:
        super().__init__()
        self.backend = backend  # the event loop every store call of this machine runs on
        self.dir = Path(tempfile.mkdtemp(prefix="nodestep-machine-"))
        self.path = self.dir / "history.jsonl"
        self.memory = InMemoryStateStore()
        self.file = FilesystemStateStore(self.path)
        self.other: FilesystemStateStore | None = None  # a second writer, as another process
        # The model: every branch's records, its first sequence number, the forks.
        self.records: dict[tuple[str, str], list[Record]] = {}
        self.forks: dict[str, list[BranchRecord]] = {}
        self.torn = 0  # bytes of a torn write at the file's end, not yet cut
        self.repaired = {"file": 0, "other": 0}  # what each handle's repaired_bytes must be

    def teardown(self) -> None:
        for store in (self.file, self.other):
            if store is not None:
                self.run(store.aclose())
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers -----------------------------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one store call to completion, on a new event loop of the machine's back end."""

        async def main() -> T:
            return await coro

        return anyio.run(main, backend=self.backend)

    def last(self, thread: str, branch: str) -> int:
        records = self.records.get((thread, branch))
        return records[-1]["seq"] if records else 0

    def writer(self, use_other: bool) -> tuple[str, FilesystemStateStore]:
        """The file handle to write with; a writer cuts a torn tail before writing."""
        if use_other:
            if self.other is None:
                self.other = FilesystemStateStore(self.path)  # opening cuts a torn tail too
                self.repaired["other"] += self.torn
                self.torn = 0
            return "other", self.other
        return "file", self.file

    def wrote(self, handle: str) -> None:
        self.repaired[handle] += self.torn
        self.torn = 0

    def new_batch(self, data: st.DataObject, thread: str, branch: str, after: int) -> list[Record]:
        kinds = data.draw(st.lists(st.booleans(), min_size=1, max_size=3), label="checkpoints")
        values = data.draw(json_values, label="values")
        return [
            record(thread, branch, after + 1 + i, {**values, "i": i}, cp=cp)
            for i, cp in enumerate(kinds)
        ]

    def draw_branch(self, data: st.DataObject, *, with_main: bool) -> tuple[str, str]:
        keys = sorted(self.records)
        if with_main:
            keys = sorted(set(keys) | {(t, "main") for t in THREADS})
        return data.draw(st.sampled_from(keys), label="branch")

    # -- rules -------------------------------------------------------------------------------

    @rule(data=st.data(), use_other=st.booleans())
    def append(self, data: st.DataObject, use_other: bool) -> None:
        thread, branch = self.draw_branch(data, with_main=True)
        after = self.last(thread, branch)
        batch = self.new_batch(data, thread, branch, after)
        handle, store = self.writer(use_other)
        self.run(self.memory.append(thread, branch, batch, after=after))
        self.run(store.append(thread, branch, batch, after=after))
        self.wrote(handle)
        self.records.setdefault((thread, branch), []).extend(batch)

    @rule(data=st.data(), use_other=st.booleans())
    def append_after_a_stale_sequence(self, data: st.DataObject, use_other: bool) -> None:
        thread, branch = self.draw_branch(data, with_main=True)
        last = self.last(thread, branch)
        after = data.draw(st.integers(min_value=0, max_value=last + 2), label="after")
        after += after >= last  # any number but the right one
        batch = self.new_batch(data, thread, branch, after)
        handle, store = self.writer(use_other)
        found = []
        for target in (self.memory, store):
            with pytest.raises(ThreadConflictError, match="was changed by another writer") as info:
                self.run(target.append(thread, branch, batch, after=after))
            found.append((info.value.expected, info.value.found, str(info.value)))
        self.wrote(handle)  # the writer took the lock, and so cut a torn tail, before refusing
        assert found[0] == found[1]
        assert found[0][:2] == (after, last)

    @precondition(lambda self: self.records)
    @rule(data=st.data(), use_other=st.booleans(), more=st.booleans())
    def create_branch(self, data: st.DataObject, use_other: bool, more: bool) -> None:
        thread, parent = self.draw_branch(data, with_main=False)
        records = self.records[(thread, parent)]
        at = data.draw(st.sampled_from(records), label="fork at")
        name = data.draw(st.sampled_from(FORK_NAMES), label="name")
        branch = BranchRecord(
            id=name,
            thread_id=thread,
            parent_id=parent,
            from_event_id=at["id"],
            from_sequence=at["seq"],
            created_at=time.time(),
        )
        values = data.draw(json_values, label="values")
        first = [record(thread, name, at["seq"] + 1, values, cp=True)]
        if more:
            first.append(record(thread, name, at["seq"] + 2, {"after": "fork"}, cp=False))
        handle, store = self.writer(use_other)
        created = self.run(self.memory.create_branch(branch, first))
        assert self.run(store.create_branch(branch, first)) == created
        self.wrote(handle)
        assert created == ((thread, name) not in self.records)
        if created:
            self.records[(thread, name)] = first
            self.forks.setdefault(thread, []).append(branch)

    @rule()
    def reopen(self) -> None:
        self.run(self.file.aclose())
        self.file = FilesystemStateStore(self.path)
        assert self.file.repaired_bytes == self.torn
        self.repaired["file"] = self.torn
        self.torn = 0

    @precondition(lambda self: self.torn == 0)  # a writer cuts a torn tail before writing
    @rule(data=st.data())
    def crash_mid_write_then_reopen(self, data: st.DataObject) -> None:
        tail = self.torn_bytes(data)
        with self.path.open("ab") as f:
            f.write(tail)
        self.run(self.file.aclose())
        self.file = FilesystemStateStore(self.path)
        assert self.file.repaired_bytes == len(tail)
        self.repaired["file"] = len(tail)

    @precondition(lambda self: self.torn == 0)
    @rule(data=st.data())
    def crash_mid_write_while_others_keep_the_file_open(self, data: st.DataObject) -> None:
        tail = self.torn_bytes(data)
        with self.path.open("ab") as f:
            f.write(tail)
        self.torn = len(tail)

    def torn_bytes(self, data: st.DataObject) -> bytes:
        """Garbage without a newline, or the start of a real append of several records."""
        if not self.records or data.draw(st.booleans(), label="garbage"):
            return data.draw(garbage, label="tail")
        thread, branch = self.draw_branch(data, with_main=False)
        batch = self.new_batch(data, thread, branch, self.last(thread, branch))
        lines = [_codec.encode_event(r) for r in batch]
        written = b"".join([_codec.batch_line(lines), *lines]) if len(lines) > 1 else lines[0]
        # The length varies with timestamps, so draw where to cut relative to it.
        inside = data.draw(st.integers(min_value=0, max_value=999), label="per mille")
        return written[: 1 + (len(written) - 2) * inside // 1000]

    @rule(data=st.data())
    def read_a_range(self, data: st.DataObject) -> None:
        thread, branch = self.draw_branch(data, with_main=True)
        last = self.last(thread, branch)
        start = data.draw(st.integers(min_value=0, max_value=last + 2), label="start")
        stop = data.draw(st.none() | st.integers(min_value=0, max_value=last + 2), label="stop")
        expected = [
            r
            for r in self.records.get((thread, branch), [])
            if r["seq"] >= start and (stop is None or r["seq"] <= stop)
        ]
        for store in (self.memory, self.file):
            assert self.run(store.read(thread, branch, start=start, stop=stop)) == expected

    # -- invariants --------------------------------------------------------------------------

    async def observe(self, store: StateStore) -> dict[Any, Any]:
        """Everything a caller can ask the store about the branches and ids the model knows."""
        seen: dict[Any, Any] = {}
        for (thread, branch), records in sorted(self.records.items()):
            first, last = records[0]["seq"], records[-1]["seq"]
            key = (thread, branch)
            seen[key, "read"] = await store.read(thread, branch)
            seen[key, "read inside"] = await store.read(thread, branch, start=first + 1, stop=last)
            seen[key, "last"] = await store.last_sequence(thread, branch)
            seen[key, "checkpoint"] = await store.last_checkpoint(thread, branch)
            for at in range(first - 1, last + 2):
                seen[key, "checkpoint", at] = await store.last_checkpoint(
                    thread, branch, at_or_before=at
                )
            seen[key, "tail"] = await outcome(store.read_tail(thread, branch))
            for at in range(first, last + 1):
                seen[key, "tail", at] = await outcome(store.read_tail(thread, branch, at=at))
            for r in records:
                seen[r["id"]] = await store.locate(thread, r["id"])
                other = THREADS[(THREADS.index(thread) + 1) % len(THREADS)]
                seen[r["id"], "elsewhere"] = await store.locate(other, r["id"])
        for thread in THREADS:
            seen[thread, "branches"] = await store.list_branches(thread)
            seen[thread, "nowhere"] = (
                await store.read(thread, "nowhere"),
                await store.last_sequence(thread, "nowhere"),
                await store.last_checkpoint(thread, "nowhere"),
                await store.read_tail(thread, "nowhere"),
            )
        seen["unknown id"] = await store.locate("t1", str(uuid.uuid4()))
        return seen

    @invariant()
    def stores_agree_with_each_other_and_the_model(self) -> None:
        in_memory = self.run(self.observe(self.memory))
        in_file = self.run(self.observe(self.file))
        assert in_file.keys() == in_memory.keys()
        for key, value in in_memory.items():
            assert in_file[key] == value, key
        for (thread, branch), records in self.records.items():
            assert in_memory[(thread, branch), "read"] == records
            assert in_memory[(thread, branch), "last"] == records[-1]["seq"]
            for r in records:
                assert in_memory[r["id"]] == (branch, r["seq"])
        for thread in THREADS:
            assert in_memory[thread, "branches"] == self.forks.get(thread, [])

    @invariant()
    def torn_tails_are_cut_by_the_next_writer_only(self) -> None:
        assert self.file.repaired_bytes == self.repaired["file"]
        if self.other is not None:
            assert self.other.repaired_bytes == self.repaired["other"]
        if self.torn == 0:
            assert self.path.read_bytes().endswith(b"\n")


@pytest.mark.slow
def test_file_store_agrees_with_memory_store(anyio_backend: str) -> None:
    run_state_machine_as_test(
        lambda: StoresAgree(anyio_backend),
        settings=settings(max_examples=60, stateful_step_count=30, deadline=None),
    )
