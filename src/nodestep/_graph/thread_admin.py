"""Managing a graph's threads as a whole: list them, delete one, prune old history.

``Graph`` inherits these methods; each calls the store's method of the same name (see
``nodestep.store.threads`` and ``docs/threads.md`` for the rules) on the graph's store, or
on ``state_store=``. Each has a sync form with the suffix ``_sync``.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodestep._graph.sync_form import sync_form
from nodestep.store import StateStore, ThreadPage, ThreadStatus

__all__ = ["ThreadAdmin"]


class ThreadAdmin:
    """``list_threads``, ``delete_thread`` and ``prune`` of a graph; ``Graph`` inherits them."""

    def _store(self, state_store: StateStore | None) -> StateStore:
        raise NotImplementedError  # ThreadMethods's, which Graph inherits too

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
            GraphConfigError: The graph has no store.
        """
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
                out of range.
        """
        store = self._store(state_store)
        return await store.prune(thread_id, keep_last=keep_last, older_than=older_than)

    # -- the sync forms -------------------------------------------------------------------

    list_threads_sync = sync_form(list_threads)
    delete_thread_sync = sync_form(delete_thread)
    prune_sync = sync_form(prune)
