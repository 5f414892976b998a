"""What every route shares: the graphs, the store, the rows, the executor, the limits.

One ``Service`` per app, on ``app.state.service``; the routes look threads and assistants
up through it, so a missing thread is the same 404 and an unknown graph the same 422 on
every endpoint.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio

from nodestep import Agent, Graph
from nodestep.memory import MemoryStore
from nodestep.serve._bodies import ApiError, thread_uuid
from nodestep.serve._execution import Executor
from nodestep.serve._registry import Registry, ThreadRow
from nodestep.serve._shapes import assistant_id_of
from nodestep.store import StateStore

__all__ = ["Limits", "Service"]


@dataclass(frozen=True)
class Limits:
    """The request limits (body bytes, JSON nesting depth) and the streams' heartbeat."""

    max_body: int = 10 * 1024 * 1024
    max_depth: int = 100
    heartbeat: float = 5.0


class Service:
    """The server's parts, shared by the routes (``agents``: the served ``Agent``s, whose
    runs a chat client starts with its messages)."""

    def __init__(
        self,
        graphs: dict[str, Graph[Any]],
        store: StateStore,
        limits: Limits,
        memory: MemoryStore | None = None,
        agents: dict[str, Agent] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.graphs = graphs
        self.clock = clock  # when a thread's ttl runs out, by this clock
        self.agents = agents or {}
        self.store = store
        self.limits = limits
        self.memory = memory
        self.registry = Registry(store)
        self.executor = Executor(graphs, store, self.registry, memory, self.agents)
        self.assistants = {assistant_id_of(name): name for name in graphs}
        # One run created at a time: the multitask check and the stored row are one step,
        # so two requests cannot both find a thread idle.
        self.creating = anyio.Lock()

    def graph_id(self, assistant_id: str, *, unknown: int = 404) -> str:
        """Return the graph an assistant id (or a graph name) stands for.

        Raises:
            ApiError: no such assistant: ``unknown`` (404 for a UUID, 422 for a name, as
                the reference server answers).
        """
        if assistant_id in self.graphs:
            return assistant_id
        if assistant_id in self.assistants:
            return self.assistants[assistant_id]
        try:
            known = str(uuid.UUID(assistant_id))
        except ValueError:
            raise ApiError(
                422,
                f"Assistant {assistant_id!r} is neither an assistant id nor a graph name; "
                f"the graphs are: {', '.join(sorted(self.graphs))}.",
            ) from None
        if known in self.assistants:
            return self.assistants[known]
        raise ApiError(unknown, f"Assistant {assistant_id!r} not found.")

    async def thread(self, thread_id: str, *, malformed: int = 422) -> ThreadRow:
        """Return a thread's row, as the store holds it now (another server may change it).

        Raises:
            ApiError: 422 (``malformed``) for an id that is no UUID, 404 for an unknown one.
        """
        key = thread_uuid(thread_id, malformed)
        await self.registry.load()
        row = self.registry.threads.get(key)
        if row is None or await self.expire(row):
            raise ApiError(404, f"Thread {thread_id!r} not found.")
        return row

    async def expire(self, row: ThreadRow) -> bool:
        """Delete the thread if its ``ttl`` has passed; return whether it did.

        A thread expires ``ttl`` minutes after it was created, or after its ``ttl`` was
        last set (``threads.update(ttl=)``), as LangGraph counts it; never while one of its
        runs is queued or running. Why checked when a thread is read or listed, not by a
        timer: a thread past its time is then never seen, and the server needs no task of
        its own that several servers sharing a store would repeat.
        """
        if not self._past_ttl(row):
            return False
        gone = False

        def expired() -> list[tuple[str, str]]:
            nonlocal gone
            # Decided on the current row: another request may have just used the thread.
            current = self.registry.threads.get(row.thread_id)
            gone = self._past_ttl(current) and not self.registry.active_runs(row.thread_id)
            return [("thread", row.thread_id)] if gone else []

        await self.registry.update(expired)
        graph = self.graph_of(row)
        if gone and graph is not None:
            await graph.delete_thread(row.thread_id, state_store=self.store)
        return gone

    def _past_ttl(self, row: ThreadRow | None) -> bool:
        return row is not None and row.expires_at is not None and self.clock() >= row.expires_at

    def graph_of(self, row: ThreadRow) -> Graph[Any] | None:
        """Return the graph that runs the thread (from its metadata), or ``None``."""
        name = row.metadata.get("graph_id")
        return self.graphs.get(name) if isinstance(name, str) else None
