"""The server's own records: threads (metadata, status, shown branch) and runs.

A LangGraph thread has metadata, a status and runs; a nodestep thread has only its history.
The server keeps what the API adds as records of one reserved thread of the same store,
``nodestep-serve``: each change is one appended record holding the whole new row, and a
load folds them. Why the same store: a run is acknowledged only once its row is stored, so
the store that keeps the history also keeps the promise to run it, on every back end
(memory, file, SQLite, PostgreSQL), and servers sharing a store share the rows.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from nodestep import StateStoreError, ThreadConflictError
from nodestep.store import StateStore

__all__ = ["REGISTRY_THREAD", "Registry", "RunRow", "ThreadRow"]

REGISTRY_THREAD = "nodestep-serve"
"""The reserved thread id whose records are the server's threads and runs."""

_ACTIVE = frozenset({"pending", "running"})


@dataclass
class ThreadRow:
    """A thread as the API sees it; ``branch`` is the nodestep branch the thread shows;
    ``expires_at``: when its ``ttl`` runs out and it is deleted, or ``None``."""

    thread_id: str
    created_at: float
    updated_at: float
    metadata: dict[str, Any] = field(default_factory=dict)
    status: str = "idle"
    branch: str = "main"
    error: dict[str, Any] | None = None
    expires_at: float | None = None


@dataclass
class RunRow:
    """A run: what was asked (``kwargs``, as the request gave it) and how it stands."""

    run_id: str
    thread_id: str
    assistant_id: str
    graph_id: str
    created_at: float
    updated_at: float
    status: str = "pending"
    metadata: dict[str, Any] = field(default_factory=dict)
    multitask_strategy: str = "reject"
    kwargs: dict[str, Any] = field(default_factory=dict)
    temporary: bool = False


class Registry:
    """The rows, in memory, with every change appended to the store before it counts.

    Why the rows are refreshed (``load``) before a request reads them, and every change is
    appended ``after`` the last record seen: several servers may share the store, and each
    must see the threads and runs the others made, and never overwrite a row with one built
    from a stale copy. A change that meets a newer record is rebuilt from the fresh rows.
    """

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._seq = 0
        self._lock = anyio.Lock()
        self.threads: dict[str, ThreadRow] = {}
        self.runs: dict[str, RunRow] = {}
        # Why indexes: a request looks at one thread's runs, and must not cost more as the
        # server's runs (all threads, all time) grow.
        self._of_thread: dict[str, dict[str, RunRow]] = {}
        self._active: dict[str, dict[str, RunRow]] = {}

    async def load(self) -> None:
        """Fold the stored records written since the last load (all of them at first)."""
        async with self._lock:
            await self._load()

    async def _load(self) -> None:
        records = await self._store.read(REGISTRY_THREAD, "main", start=self._seq + 1)
        for record in records:
            self._apply(record)
            self._seq = record["seq"]

    def _apply(self, record: dict[str, Any]) -> None:
        kind, row = record["type"], record.get("row")
        if kind == "serve_thread":
            assert row is not None
            self.threads[row["thread_id"]] = ThreadRow(**row)
        elif kind == "serve_run":
            assert row is not None
            self._put_run(RunRow(**row))
        elif kind == "serve_thread_deleted":
            gone = record["thread_id"]
            self.threads.pop(gone, None)
            self._active.pop(gone, None)
            for run_id in self._of_thread.pop(gone, {}):
                del self.runs[run_id]
        elif kind == "serve_run_deleted" and (run := self.runs.pop(record["run_id"], None)):
            self._of_thread.get(run.thread_id, {}).pop(run.run_id, None)
            self._active.get(run.thread_id, {}).pop(run.run_id, None)

    def _put_run(self, run: RunRow) -> None:
        self.runs[run.run_id] = run
        self._of_thread.setdefault(run.thread_id, {})[run.run_id] = run
        if run.status in _ACTIVE:
            self._active.setdefault(run.thread_id, {})[run.run_id] = run
        elif (active := self._active.get(run.thread_id)) is not None:
            active.pop(run.run_id, None)
            if not active:
                del self._active[run.thread_id]

    async def write(self, *changes: ThreadRow | RunRow | tuple[str, str]) -> None:
        """Store the changed rows (and deletions, as ``(kind, id)``) in one append.

        Raises:
            StateStoreError: the store cannot write them; nothing changed.
        """
        await self.update(lambda: changes)

    async def update(
        self, build: Callable[[], Sequence[ThreadRow | RunRow | tuple[str, str]]]
    ) -> None:
        """Store the changes ``build`` makes from the current rows, in one append.

        ``build`` is called again on fresh rows whenever another server wrote first, so a
        check it makes (a thread idle, a row's fields) holds for the changes stored.

        Raises:
            StateStoreError: the store cannot write them; nothing changed.
            Exception: whatever ``build`` raises (nothing is stored then).
        """
        async with self._lock:
            fresh = False  # whether the rows were read from the store during this call
            for _ in range(20):
                try:
                    changes = build()
                except Exception:
                    if fresh:
                        raise
                    changes = None
                if not changes:
                    # A refusal or "nothing to change" may come from stale rows: decide
                    # it again on fresh ones before it counts.
                    if fresh:
                        return
                    await self._load()
                    fresh = True
                    continue
                records = [
                    self._record(change, self._seq + n + 1) for n, change in enumerate(changes)
                ]
                try:
                    await self._store.append(REGISTRY_THREAD, "main", records, after=self._seq)
                except ThreadConflictError:  # another server wrote first: read, then rebuild
                    await self._load()
                    fresh = True
                    continue
                for record in records:
                    self._apply(record)
                self._seq += len(records)
                return
            raise StateStoreError(
                f"The server's records in thread {REGISTRY_THREAD!r} kept changing under it "
                f"(another server writes to this store); try the request again."
            )

    def remember(self, *rows: ThreadRow | RunRow) -> None:
        """Take rows in memory only; the next ``write`` of them stores them.

        For a run whose request waits for its end (``runs.wait``): nothing is acknowledged
        before the run ends, so its row is stored once, with its end, and a server killed
        meanwhile leaves the caller an error to retry on rather than a promise to keep.
        """
        for row in rows:
            if isinstance(row, ThreadRow):
                self.threads[row.thread_id] = row
            else:
                self._put_run(row)

    def _record(self, change: ThreadRow | RunRow | tuple[str, str], seq: int) -> dict[str, Any]:
        base: dict[str, Any] = {
            "id": str(uuid.uuid4()),
            "seq": seq,
            "ts": time.time(),
            "thread": REGISTRY_THREAD,
            "branch": "main",
        }
        # A shallow copy, not asdict's deep one: rows are replaced, never changed in place.
        if isinstance(change, ThreadRow):
            row = vars(change).copy()
            if row["expires_at"] is None:  # left out: a server of an earlier version reads it
                del row["expires_at"]
            return base | {"type": "serve_thread", "row": row}
        if isinstance(change, RunRow):
            return base | {"type": "serve_run", "row": vars(change).copy()}
        kind, ident = change
        if kind == "thread":
            return base | {"type": "serve_thread_deleted", "thread_id": ident}
        return base | {"type": "serve_run_deleted", "run_id": ident}

    def active_runs(self, thread_id: str) -> list[RunRow]:
        """Return the thread's pending and running runs, oldest first."""
        runs = self._active.get(thread_id)
        return sorted(runs.values(), key=lambda r: r.created_at) if runs else []

    def runs_of(self, thread_id: str) -> list[RunRow]:
        """Return every run of the thread, in no order."""
        return list(self._of_thread.get(thread_id, {}).values())

    def unfinished(self) -> list[RunRow]:
        """Return every pending or running run, oldest first: what a new server continues."""
        runs = [r for r in self.runs.values() if r.status in _ACTIVE]
        return sorted(runs, key=lambda r: r.created_at)
