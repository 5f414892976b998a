"""Helpers of the tests that run graphs on stores (imported by name: tests have no package)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any

import anyio
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
from nodestep.store import StateStore

Record = dict[str, Any]


opened: list[StateStore] = []


class Poll(BaseState):
    """A vote count: ``tally`` counts the votes, which add up across turns."""

    votes: Annotated[list[str], add] = Field(default_factory=list)
    count: int = 0


@node
def tally(state: Poll) -> dict[str, int]:
    return {"count": len(state.votes)}


def poll_graph(store: StateStore) -> Graph[Poll]:
    return Graph(Poll, state_store=store).flow(START >> tally, tally >> END)


def open_file(path: Path) -> FilesystemStateStore:
    """Open a file store that the ``close_opened_stores`` fixture closes after the test."""
    store = FilesystemStateStore(path)
    opened.append(store)
    return store


def reopened(store: StateStore) -> StateStore:
    """The same history through a new store object, as another process would see it."""
    if isinstance(store, FilesystemStateStore):
        return open_file(store.path)
    return store


async def cancel_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` once ``event`` is set: a run stopped at the point the event marks."""
    with anyio.fail_after(5):  # a bound for a test whose event never comes, not an order
        await event.wait()
    scope.cancel()


async def records(store: StateStore, thread_id: str, branch_id: str = "main") -> list[Record]:
    """The stored records of a branch, as the store reads them back."""
    return await store.read(thread_id, branch_id)


def records_sync(
    store: StateStore, thread_id: str, branch_id: str = "main", *, stop: int | None = None
) -> list[Record]:
    """``records`` for a sync test (up to ``stop``): the read runs on an event loop of its own."""
    return anyio.run(functools.partial(store.read, thread_id, branch_id, stop=stop))


class CountingReads:
    """Store mixin: records how many records each read returns, to bound what a load replays."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read_sizes: list[int] = []

    async def read(
        self, thread_id: str, branch_id: str, *, start: int = 1, stop: int | None = None
    ) -> list[Record]:
        got: list[Record] = await super().read(  # type: ignore[misc]
            thread_id, branch_id, start=start, stop=stop
        )
        self.read_sizes.append(len(got))
        return got

    async def read_tail(
        self, thread_id: str, branch_id: str, *, at: int | None = None
    ) -> list[Record]:
        # What a load reads: the last checkpoint and the records after it.
        got: list[Record] = await super().read_tail(thread_id, branch_id, at=at)  # type: ignore[misc]
        self.read_sizes.append(len(got))
        return got


class CountingMemoryStore(CountingReads, InMemoryStateStore):
    pass


class CountingFileStore(CountingReads, FilesystemStateStore):
    pass


def counting_store(kind: str, tmp_path: Path) -> Any:
    """A store of ``kind`` (``"memory"`` or ``"filesystem"``) that counts what it reads."""
    if kind == "memory":
        return CountingMemoryStore()
    return CountingFileStore(tmp_path / "counting.jsonl")


def spy_on_commits(mp: Any, keep: Any) -> None:
    """Call ``keep(writer)`` after each of a ``HistoryWriter``'s commits stored records.

    Every way a run commits: its first records with the lease (``commit_taking``, when
    they were stored), a superstep (``commit``), and its last records (``commit_last``).
    """
    from nodestep._engine.writer import HistoryWriter

    def wrapped(name: str) -> Any:
        original = getattr(HistoryWriter, name)

        async def spy(self: HistoryWriter, *args: Any) -> Any:
            result = await original(self, *args)
            if name != "commit_taking" or result[1]:
                keep(self)
            return result

        return spy

    for name in ("commit", "commit_taking", "commit_last"):
        mp.setattr(HistoryWriter, name, wrapped(name))
