"""The thread methods of ``Graph``: read and change a thread's history outside a run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from pydantic import BaseModel

from nodestep.engine import threads
from nodestep.engine.cache import Latest, PositionCache
from nodestep.errors import GraphConfigError
from nodestep.state.schema import StateSchema
from nodestep.store.base import BranchRecord, StateStore
from nodestep.store.history import History, StateSnapshot

if TYPE_CHECKING:
    from nodestep.graph.graph import Graph

__all__ = ["ThreadMethods"]

S = TypeVar("S", bound=BaseModel)


class ThreadMethods(Generic[S]):
    """Async methods to read and change a graph's threads; ``Graph`` inherits them.

    Every method takes ``state_store=`` (it wins over the graph's store) and, but for
    ``fork`` and ``branches``, ``branch_id=`` (default ``"main"``).
    """

    name: str
    state_store: StateStore | None
    schema: StateSchema
    _positions: PositionCache

    @property
    def _graph(self) -> Graph[Any]:
        return cast("Graph[Any]", self)

    def _store(self, state_store: StateStore | None) -> StateStore:
        store = state_store if state_store is not None else self.state_store
        if store is None:
            raise GraphConfigError(
                f"Graph '{self.name}' has no state store, so it keeps no threads. Pass "
                f"state_store=... to Graph(...) or to this call."
            )
        return store

    def _cached(self, store: StateStore, thread_id: str, branch_id: str, seq: int) -> Latest | None:
        """Return the graph's cached latest position of a branch whose last record is ``seq``.

        The caller has just asked the store for ``seq``, so a hit is up to date.

        Raises:
            UnknownThreadError: the branch has no records.
        """
        if seq == 0:
            raise threads.unknown_thread(thread_id, branch_id)
        return self._positions.latest(store, self.schema, thread_id, branch_id, seq)

    async def exists(
        self, thread_id: str, *, branch_id: str = "main", state_store: StateStore | None = None
    ) -> bool:
        """Return whether the store has history for the thread (and branch)."""
        return await threads.exists(self._store(state_store), thread_id, branch_id)

    async def history(
        self, thread_id: str, *, branch_id: str = "main", state_store: StateStore | None = None
    ) -> History:
        """Return every recorded event and checkpoint of the branch; empty if it never ran."""
        return await threads.history(self._store(state_store), thread_id, branch_id)

    async def load(
        self,
        thread_id: str,
        at: str | None = None,
        *,
        branch_id: str = "main",
        state_store: StateStore | None = None,
    ) -> dict[str, Any]:
        """Return the state as a dict, at the latest event or at event ``at``.

        Raises:
            UnknownThreadError: the thread, branch or event does not exist.
        """
        store = self._store(state_store)
        if at is None:
            seq = await store.last_sequence(thread_id, branch_id)
            latest = self._cached(store, thread_id, branch_id, seq)
            if latest is not None:
                return latest.values(self.schema)
        return await threads.load(self._graph, store, thread_id, branch_id, at)

    async def get_state(
        self,
        thread_id: str,
        at: str | None = None,
        *,
        branch_id: str = "main",
        state_store: StateStore | None = None,
    ) -> StateSnapshot[S]:
        """Return a ``StateSnapshot``: the state as the declared type and its event.

        Raises:
            UnknownThreadError: the thread, branch or event does not exist.
        """
        store = self._store(state_store)
        if at is None:  # the common call, answered from the graph's cache when it can
            seq = await store.last_sequence(thread_id, branch_id)
            latest = self._cached(store, thread_id, branch_id, seq)
            if latest is not None:
                return latest.snapshot(self.schema, seq, thread_id, branch_id)
        return await threads.get_state(self._graph, store, thread_id, branch_id, at)

    async def update_state(
        self,
        thread_id: str,
        values: dict[str, Any] | S,
        *,
        create: bool = False,
        branch_id: str = "main",
        state_store: StateStore | None = None,
    ) -> str:
        """Apply an update through the reducers, as a node would; return the event id.

        On a paused or unfinished thread the resumed nodes read the edited values.

        Raises:
            UnknownThreadError: the thread does not exist and ``create`` is false.
            InvalidUpdateError: the edit changes a field without a merging reducer that a
                finished task of the pending superstep already wrote.
        """
        store = self._store(state_store)
        return await threads.update_state(
            self._graph, store, thread_id, values, branch_id=branch_id, create=create
        )

    async def fork(
        self,
        thread_id: str,
        *,
        from_: str,
        name: str | None = None,
        state_store: StateStore | None = None,
    ) -> BranchRecord:
        """Start a new branch at event ``from_``; the original branch is left unchanged.

        The branch continues where the run stood at ``from_``: ``invoke(None,
        branch_id=...)`` continues an unfinished superstep there, ``resume=`` answers a
        pause, and new input starts a new turn from that state.

        Returns:
            The ``BranchRecord``; its ``id`` is ``name``, or a random id.
        """
        return await threads.fork(self._graph, self._store(state_store), thread_id, from_, name)

    async def branches(
        self, thread_id: str, *, state_store: StateStore | None = None
    ) -> list[BranchRecord]:
        """Return the branches forked from the thread, oldest first."""
        return await threads.branches(self._store(state_store), thread_id)
