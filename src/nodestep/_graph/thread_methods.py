"""The thread methods of ``Graph``: read and change a thread's history outside a run.

Each method is async, as the persistence docs name it (``await graph.get_state(...)``),
and has a sync form with the suffix ``_sync`` (``graph.get_state_sync(...)``) for plain
scripts and notebook cells, declared from it in one line (see ``sync_form``). A sync form
works inside a running event loop too: it then runs the method on a worker thread (see
``engine.sync``).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from nodestep._engine import history_ops, walk
from nodestep._engine import thread_writes as held
from nodestep._engine.compiled import CompiledGraph, ThreadServices
from nodestep._engine.history import History, StateHistory, StateSnapshot
from nodestep._engine.migrate import Migration
from nodestep._errors import GraphConfigError
from nodestep._flow.nodes import Node
from nodestep._graph.async_call import async_call
from nodestep._graph.sync_form import sync_form
from nodestep.store import BranchRecord, StateStore

__all__ = ["ThreadMethods"]

S = TypeVar("S", bound=BaseModel)


class ThreadMethods(Generic[S]):
    """Methods to read and change a graph's threads; ``Graph`` inherits them.

    Every method takes ``state_store=`` (it wins over the graph's store) and ``branch_id=``,
    ``"main"`` by default; ``None`` for ``fork``, ``load`` and ``get_state`` (the event's own
    branch; without ``at=``, ``"main"``) and for ``branches`` (every branch of the thread).
    """

    # Set by the graph: what the thread methods need, the graph's default store and flow.
    _services: ThreadServices
    _state_store: StateStore | None
    _compiled: CompiledGraph | None

    @property
    def name(self) -> str:
        """The graph's name."""
        return self._services.name

    def _store(self, state_store: StateStore | None) -> StateStore:
        store = state_store if state_store is not None else self._state_store
        if store is None:
            raise GraphConfigError(
                f"Graph '{self.name}' has no state store, so it keeps no threads. Pass "
                f"state_store=... to Graph(...) or to this call."
            )
        return store

    # -- async, as the persistence contract names them ------------------------------------

    @async_call
    async def exists(
        self, thread_id: str, *, branch_id: str = "main", state_store: StateStore | None = None
    ) -> bool:
        """Return whether the store has history for the thread (and branch); await it."""
        return await history_ops.exists(self._store(state_store), thread_id, branch_id)

    async def history(
        self, thread_id: str, *, branch_id: str = "main", state_store: StateStore | None = None
    ) -> History:
        """Return every recorded event and checkpoint of the branch; empty if it never ran."""
        return await history_ops.history(self._store(state_store), thread_id, branch_id)

    async def load(
        self,
        thread_id: str,
        at: str | None = None,
        *,
        branch_id: str | None = None,
        state_store: StateStore | None = None,
    ) -> dict[str, Any]:
        """Return the state as a dict, at the latest event or at event ``at``.

        Raises:
            UnknownThreadError: the thread, branch or event does not exist (on ``branch_id``).
        """
        store = self._store(state_store)
        services = self._services
        if at is None:
            branch_id = "main" if branch_id is None else branch_id
            seq = await store.last_sequence(thread_id, branch_id)
            latest = history_ops.cached_latest(services, store, thread_id, branch_id, seq)
            if latest is not None:
                return latest.values(services.schema)
        return await history_ops.load(services, store, thread_id, branch_id, at)

    async def get_state(
        self,
        thread_id: str,
        at: str | None = None,
        *,
        branch_id: str | None = None,
        state_store: StateStore | None = None,
    ) -> StateSnapshot[S]:
        """Return a ``StateSnapshot``: the state as the declared type and its event.

        Raises:
            UnknownThreadError: the thread, branch or event does not exist (on ``branch_id``).
        """
        store = state_store if state_store is not None else self._state_store
        if store is None:
            store = self._store(None)  # raises
        services = self._services
        if at is None:  # the common call, answered from the graph's cache when it can
            branch_id = "main" if branch_id is None else branch_id
            seq = await store.last_sequence(thread_id, branch_id)
            latest = history_ops.cached_latest(services, store, thread_id, branch_id, seq)
            if latest is not None:
                return latest.snapshot(services.schema, seq, thread_id, branch_id)
        return await history_ops.get_state(services, store, thread_id, branch_id, at)

    async def state_history(
        self, thread_id: str, *, branch_id: str = "main", state_store: StateStore | None = None
    ) -> StateHistory[S]:
        """Return the branch's events in order, each with the state after it.

        One read and one fold of the branch from its first checkpoint, however long it is:
        use it to print the state at each step instead of one ``load(at=...)`` per event.
        ``last_pause()`` and ``before(node)`` find an event to fork at.

        Returns:
            A ``StateHistory`` of ``HistoryStep``s: the event, the ``StateSnapshot`` after
            it, and the nodes it records.

        Raises:
            UnknownThreadError: the thread or branch has no history.
        """
        store = self._store(state_store)
        return await walk.state_history(self._services, store, thread_id, branch_id)

    @async_call
    async def update_state(
        self,
        thread_id: str,
        values: dict[str, Any] | S,
        *,
        create: bool = False,
        branch_id: str = "main",
        state_store: StateStore | None = None,
        as_node: str | Node | None = None,
    ) -> str:
        """Apply an update through the reducers, as a node would; return the event id.

        Await it. On a paused or unfinished thread the resumed nodes read the edited values.
        With ``as_node``, the update is recorded as written by that node and
        ``invoke(None)`` continues from the node's routes (see the persistence docs).

        Raises:
            UnknownThreadError: the thread does not exist and ``create`` is false.
            InvalidUpdateError: the edit changes a field without a merging reducer that a
                finished task of the pending superstep already wrote.
            GraphConfigError: ``as_node`` names no node (the message lists them), or no
                unfinished task of the pending superstep.
            ResumeError: ``as_node`` on a paused or blocked thread.
        """
        store = self._store(state_store)
        graph = self._services if self._compiled is None else self._compiled
        return await held.update_state(graph, store, thread_id, values, branch_id, create, as_node)

    @async_call
    async def migrate(
        self,
        thread_id: str,
        fn: Migration,
        *,
        from_state: type[BaseModel],
        branch_id: str = "main",
        state_store: StateStore | None = None,
    ) -> str:
        """Move a stored thread to this graph's state class; return the event id.

        Await it. Reads the branch with ``from_state``, the class it was stored with, and
        records a checkpoint marked ``"migration"`` holding ``fn``'s values (fields left out
        get defaults). Earlier events keep their values, which ``from_state`` still reads.

        Args:
            thread_id: The thread.
            fn: Takes the stored values (a dict of JSON values) and returns a dict of this
                graph's field values.
            from_state: The state class the thread was stored with.
            branch_id: The branch to migrate.
            state_store: A store for this call; it wins over the graph's.

        Raises:
            UnknownThreadError: the thread or branch has no history.
            GraphConfigError: a superstep of the thread is paused or unfinished.
            StateStoreError: ``from_state`` cannot read the thread, or a new value has no
                JSON form.
            StateUpdateError: ``fn``'s values do not fit this graph's state class.
        """
        store = self._store(state_store)
        return await held.migrate(self._services, store, thread_id, fn, from_state, branch_id)

    @async_call
    async def fork(
        self,
        thread_id: str,
        *,
        from_: str,
        name: str | None = None,
        branch_id: str | None = None,
        state_store: StateStore | None = None,
    ) -> BranchRecord:
        """Start a new branch at event ``from_``; the original branch is left unchanged.

        Await it. The branch continues where the run stood at ``from_``: ``invoke(None,
        branch_id=...)`` continues an unfinished superstep there, ``resume=`` answers a
        pause, and new input starts a new turn from that state.

        Args:
            thread_id: The thread.
            from_: The id of the event to start at.
            name: The new branch's id; a random id when ``None``.
            branch_id: The branch that holds ``from_`` (a fork of a fork names its
                branch); ``None`` takes the branch from the event.
            state_store: A store for this call; it wins over the graph's.

        Returns:
            The ``BranchRecord``; its ``id`` is ``name``, or a random id.

        Raises:
            UnknownThreadError: the thread, branch or event does not exist, or the event
                is on another branch than ``branch_id``.
            GraphConfigError: ``name`` is taken, ``"main"`` or blank.
        """
        store = self._store(state_store)
        return await history_ops.fork(self._services, store, thread_id, from_, name, branch_id)

    async def branches(
        self,
        thread_id: str,
        *,
        branch_id: str | None = None,
        state_store: StateStore | None = None,
    ) -> list[BranchRecord]:
        """Return the branches forked from the thread, oldest first.

        Args:
            thread_id: The thread.
            branch_id: Only the branches forked from this branch (``"main"``: the forks of
                the main line); ``None`` lists every branch of the thread.
            state_store: A store for this call; it wins over the graph's.

        Raises:
            UnknownThreadError: the thread, or the branch ``branch_id``, has no history.
        """
        return await history_ops.branches(self._store(state_store), thread_id, branch_id)

    # -- the sync forms, for scripts and notebook cells ----------------------------------

    exists_sync = sync_form(exists)
    history_sync = sync_form(history)
    load_sync = sync_form(load)
    get_state_sync = sync_form(get_state)
    state_history_sync = sync_form(state_history)
    update_state_sync = sync_form(update_state)
    migrate_sync = sync_form(migrate)
    fork_sync = sync_form(fork)
    branches_sync = sync_form(branches)
