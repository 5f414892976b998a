"""``ThreadMethods``: read and change a graph's threads outside a run; ``Graph`` inherits it.

Each method is async, as the persistence docs name it (``await graph.get_state(...)``),
and has a sync form with the suffix ``_sync`` (``graph.get_state_sync(...)``) for plain
scripts and notebook cells, declared from it in one line (see ``sync_form``). A sync form
works inside a running event loop too: it then runs the method on a worker thread (see
``_engine.sync``).

The methods read the history (``exists`` ... ``branches``), manage threads as a whole
(``list_threads``, ``delete_thread``, ``prune``: each calls the store's method of the same
name; see ``nodestep.store._threads`` and ``docs/threads.md``), and read what a run keeps
apart from the state (``node_state``, a node's private state, see ``docs/node_state.md``;
``subgraph_state``, an unfinished subgraph run, see ``docs/subgraphs.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from nodestep._engine import history_ops, walk
from nodestep._engine import thread_writes as held
from nodestep._engine.compiled import CompiledGraph, ThreadServices
from nodestep._engine.diff import ThreadDiff, diff_thread
from nodestep._engine.history import History, StateHistory, StateSnapshot
from nodestep._engine.migrate import Migration
from nodestep._engine.private_state import node_state
from nodestep._engine.provenance import Provenance, field_provenance
from nodestep._engine.subgraph_state import subgraph_state
from nodestep._engine.sync import close_paused, stream_key
from nodestep._errors import GraphConfigError
from nodestep._flow.nodes import Node
from nodestep._graph.async_call import async_call
from nodestep._graph.sync_form import sync_form
from nodestep._graph.usage import Usage, usage_of
from nodestep.store import BranchRecord, StateStore, ThreadPage, ThreadStatus

__all__ = ["ThreadMethods", "no_flow_yet"]

S = TypeVar("S", bound=BaseModel)


def no_flow_yet(name: str) -> GraphConfigError:
    """Return the error for a use of graph ``name``'s flow before ``flow()`` declared it."""
    return GraphConfigError(
        f"Graph '{name}' has no flow yet; call graph.flow(START >> first, ...) first."
    )


class ThreadMethods(Generic[S]):
    """Methods to read and change a graph's threads; ``Graph`` inherits them.

    Every method takes ``state_store=`` (it wins over the graph's store) and, where a
    thread has branches, ``branch_id=``: ``"main"`` by default; ``None`` for ``fork``,
    ``load``, ``get_state`` and ``node_state`` (the event's own branch; without ``at=``,
    ``"main"``) and for ``branches`` (every branch of the thread).

    Why the flow comes later: a graph reads and changes its threads before its flow is
    declared (a migration needs no nodes), so the methods start from the graph's
    ``ThreadServices``; ``Graph.flow()`` hands over the compiled graph, which extends
    them, for the methods that follow the flow (``node_state``, ``subgraph_state`` and
    ``update_state(as_node=...)``).

    Args:
        services: What reading and changing threads needs: the graph's name, compiled
            state class, ids, clock and lease.
        state_store: The store a call uses when it names none; ``None`` keeps nothing.
    """

    def __init__(self, services: ThreadServices, state_store: StateStore | None) -> None:
        self._graph = services
        self._state_store = state_store

    def _declare_flow(self, compiled: CompiledGraph) -> None:
        """Take the compiled graph of the flow ``Graph.flow()`` declared (once)."""
        self._graph = compiled

    def _flow_graph(self) -> CompiledGraph:
        if not isinstance(self._graph, CompiledGraph):
            raise no_flow_yet(self._graph.name)
        return self._graph

    @property
    def state_store(self) -> StateStore | None:
        """The graph's store, used when a call names none."""
        return self._state_store

    def _store(self, state_store: StateStore | None) -> StateStore:
        store = state_store if state_store is not None else self._state_store
        if store is None:
            raise GraphConfigError(
                f"Graph '{self._graph.name}' has no state store, so it keeps no threads. "
                f"Pass state_store=... to Graph(...) or to this call."
            )
        return store

    def _close_own_stream(
        self,
        thread_id: str,
        *args: Any,
        branch_id: str = "main",
        state_store: StateStore | None = None,
        **kwargs: Any,
    ) -> None:
        """Close a sync stream of the branch that this OS thread holds open, as ``invoke``
        does: the ``before`` of the ``_sync`` forms that hold the branch (``update_state``,
        ``migrate``), which would otherwise find it busy (see ``_engine.sync.track_paused``).
        """
        store = state_store if state_store is not None else self._state_store
        if store is not None and type(thread_id) is str and type(branch_id) is str:
            close_paused(stream_key(store, thread_id, branch_id))

    # -- history, as the persistence contract names the methods ---------------------------

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
        graph = self._graph
        if at is None:
            branch_id = "main" if branch_id is None else branch_id
            history_ops.check_ids(thread_id, branch_id)  # before the store sees them
            seq, last_id = await store.last_record(thread_id, branch_id)
            latest = history_ops.cached_latest(graph, store, thread_id, branch_id, seq, last_id)
            if latest is not None:
                return latest.values(graph.schema)
        return await history_ops.load(graph, store, thread_id, branch_id, at)

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
        graph = self._graph
        if at is None:  # the common call, answered from the graph's cache when it can
            branch_id = "main" if branch_id is None else branch_id
            history_ops.check_ids(thread_id, branch_id)  # before the store sees them
            seq, last_id = await store.last_record(thread_id, branch_id)
            if seq == 0:
                raise history_ops.unknown_thread(thread_id, branch_id)
            # The cache asked here, not through cached_latest: one call fewer on the common call.
            schema = graph.schema
            latest = graph.positions.latest(store, schema, thread_id, branch_id, seq, last_id)
            if latest is not None:
                return latest.snapshot(schema, seq, thread_id, branch_id)
        return await history_ops.get_state(graph, store, thread_id, branch_id, at)

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
        return await walk.state_history(self._graph, store, thread_id, branch_id)

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
        ``update_state_sync`` first closes a sync stream of the branch that the calling OS
        thread holds open, as ``invoke`` does (its run stops where it paused).

        Raises:
            UnknownThreadError: the thread does not exist and ``create`` is false.
            InvalidUpdateError: the edit changes a field without a merging reducer that a
                finished task of the pending superstep already wrote.
            GraphConfigError: ``as_node`` names no node (the message lists them), or no
                unfinished task of the pending superstep.
            ResumeError: ``as_node`` on a paused or blocked thread.
        """
        store = self._store(state_store)
        return await held.update_state(
            self._graph, store, thread_id, values, branch_id, create, as_node
        )

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
        ``migrate_sync`` first closes a sync stream of the branch that the calling OS thread
        holds open, as ``invoke`` does.

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
        return await held.migrate(self._graph, store, thread_id, fn, from_state, branch_id)

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
        return await history_ops.fork(self._graph, store, thread_id, from_, name, branch_id)

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

    # -- threads as a whole --------------------------------------------------------------

    async def list_threads(
        self,
        *,
        status: ThreadStatus | Sequence[ThreadStatus] | None = None,
        active_after: float | None = None,
        active_before: float | None = None,
        limit: int = 100,
        cursor: str | None = None,
        state_store: StateStore | None = None,
    ) -> ThreadPage:
        """Return a page of the store's threads, most recent activity first.

        Args:
            status: Only threads in this status (``"completed"``, ``"paused"``,
                ``"unfinished"``), or in one of these.
            active_after: Only threads whose last activity is at or after this
                ``time.time()`` timestamp.
            active_before: Only threads whose last activity is before this timestamp.
            limit: The most threads on the page.
            cursor: The ``next_cursor`` of the previous page; ``None`` for the first.
            state_store: A store for this call; it wins over the graph's.

        Raises:
            GraphConfigError: The graph has no store, an argument is out of range, or
                ``cursor`` is not a cursor.
        """
        return await self._store(state_store).list_threads(
            status=status,
            active_after=active_after,
            active_before=active_before,
            limit=limit,
            cursor=cursor,
        )

    async def delete_thread(self, thread_id: str, *, state_store: StateStore | None = None) -> bool:
        """Delete every record and branch of a thread; return ``False`` if it had none.

        Raises:
            GraphConfigError: The graph has no store, or ``thread_id`` is not a non-empty
                string.
        """
        history_ops.check_thread_id(thread_id)
        return await self._store(state_store).delete_thread(thread_id)

    async def prune(
        self,
        thread_id: str | None = None,
        *,
        keep_last: int | None = None,
        older_than: float | None = None,
        state_store: StateStore | None = None,
    ) -> int:
        """Drop old history of a thread (or of every thread); return how many events went.

        Each branch is cut at a checkpoint, so it still loads, runs and forks from there:
        ``keep_last`` keeps at least its last ``keep_last`` events, ``older_than`` drops
        what precedes its last checkpoint written before that ``time.time()`` timestamp;
        with both, whichever keeps more. Forks stay.

        Raises:
            GraphConfigError: The graph has no store, or neither rule is given, or one is
                out of range, or ``thread_id`` is neither ``None`` nor a non-empty string.
        """
        if thread_id is not None:  # None: every thread
            history_ops.check_thread_id(thread_id)
        store = self._store(state_store)
        return await store.prune(thread_id, keep_last=keep_last, older_than=older_than)

    # -- what a run keeps apart from the state -------------------------------------------

    async def node_state(
        self,
        thread_id: str,
        node: Node | str,
        at: str | None = None,
        *,
        branch_id: str | None = None,
        state_store: StateStore | None = None,
    ) -> BaseModel:
        """Return a node's private state on a thread, at the latest event or at event ``at``.

        The private state is not part of ``get_state().value``; this is how to read it,
        and ``at=`` reads it at any event, as ``load(at=...)`` reads the state.

        Args:
            thread_id: The thread.
            node: The node (or its name) that declares ``private_state``.
            at: An event id, as for ``load``; ``None``: the latest.
            branch_id: The branch, as for ``load``.
            state_store: A store for this call; it wins over the graph's.

        Returns:
            An instance of the node's private state model (its defaults if the node never
            changed it on the thread).

        Raises:
            GraphConfigError: no store, no flow yet, or the node is unknown or has no
                private state.
            UnknownThreadError: the thread, branch or event does not exist.
        """
        name = node.name if isinstance(node, Node) else node
        store = self._store(state_store)
        return await node_state(self._flow_graph(), store, thread_id, name, branch_id, at)

    async def subgraph_state(
        self,
        thread_id: str,
        path: str,
        at: str | None = None,
        *,
        branch_id: str = "main",
        state_store: StateStore | None = None,
    ) -> StateSnapshot[Any]:
        """Return the ``StateSnapshot`` of an unfinished subgraph run, by its task path.

        ``path`` is the task path, as in an interrupt key or ``StreamEvent.path``, e.g.
        ``"review/legal"``. The snapshot holds the child's state, status, pending tasks and
        interrupts (keyed as the child names them), at the latest event or at ``at``.

        Raises:
            GraphConfigError: no store, no flow yet, or a step of ``path`` is not a
                subgraph node.
            UnknownThreadError: the thread or event does not exist, or no unfinished
                subgraph run is kept at ``path`` (its task has not started it, or finished).
        """
        store = self._store(state_store)
        graph = self._flow_graph()
        return await subgraph_state(graph, store, thread_id, path, branch_id, at)

    async def provenance(
        self,
        thread_id: str,
        field: str,
        *,
        at: str | None = None,
        branch_id: str | None = None,
        state_store: StateStore | None = None,
    ) -> Provenance:
        """Return who wrote ``field``'s value at event ``at`` (default: the branch's head).

        ``nodestep.history.provenance`` with the graph's store and state class (which
        tells the fields that have a reducer); see ``docs/provenance.md``.
        """
        store = self._store(state_store)
        state = self._graph.schema.cls
        return await field_provenance(
            store, thread_id, field, at=at, branch_id=branch_id, state=state
        )

    async def diff(
        self, thread_id: str, a: str, b: str, *, state_store: StateStore | None = None
    ) -> ThreadDiff:
        """Compare two branches or events of a thread: fork point, fields, events since.

        ``nodestep.history.diff`` with the graph's store and state class.
        """
        store = self._store(state_store)
        return await diff_thread(store, thread_id, a, b, state=self._graph.schema.cls)

    async def usage(
        self,
        thread_id: str,
        *,
        branch_id: str = "main",
        prices: Mapping[str, tuple[float, float]] | None = None,
        state_store: StateStore | None = None,
    ) -> Usage:
        """Return the thread's token usage: in all, per node and per model; await it.

        Summed from the replies its model nodes stored (see ``docs/tracing.md``); with
        ``prices``, model name to what a million input and a million output tokens cost,
        also their cost. A model the table lacks gets no cost, and is named in
        ``Usage.unpriced``: nothing is guessed.

        Raises:
            GraphConfigError: no store, or ``prices`` is not such a table.
        """
        history = await history_ops.history(self._store(state_store), thread_id, branch_id)
        return usage_of(history, prices)

    # -- the sync forms, for scripts and notebook cells ----------------------------------

    exists_sync = sync_form(exists)
    history_sync = sync_form(history)
    load_sync = sync_form(load)
    get_state_sync = sync_form(get_state)
    state_history_sync = sync_form(state_history)
    update_state_sync = sync_form(update_state, before=_close_own_stream)
    migrate_sync = sync_form(migrate, before=_close_own_stream)
    fork_sync = sync_form(fork)
    branches_sync = sync_form(branches)
    list_threads_sync = sync_form(list_threads)
    delete_thread_sync = sync_form(delete_thread)
    prune_sync = sync_form(prune)
    node_state_sync = sync_form(node_state)
    subgraph_state_sync = sync_form(subgraph_state)
    provenance_sync = sync_form(provenance)
    diff_sync = sync_form(diff)
    usage_sync = sync_form(usage)
