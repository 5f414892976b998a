"""Thread management of the file store: listing threads from its index, dropping by rewriting.

``FilesystemStateStore`` inherits these methods. A listing is answered from the index the
store keeps anyway. ``delete_thread`` and ``prune`` rewrite the file without the dropped
lines (see ``_rewrite`` for why a rewrite, and why it is crash-safe); a call that would drop
nothing leaves the file alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nodestep._errors import StateStoreError
from nodestep.store import _rewrite
from nodestep.store._contract import Record
from nodestep.store._indexed_log import IndexedLog
from nodestep.store._locking import FileLocking, Locked
from nodestep.store._threads import ThreadPage, ThreadStatus, check_prune, page_threads

__all__ = ["FileThreads"]


class FileThreads(FileLocking):
    """``list_threads``, ``delete_thread`` and ``prune`` of the file store."""

    _log: IndexedLog
    read_only: bool

    def _check_writable(self, action: str, thread_id: str) -> None:
        raise NotImplementedError

    async def list_threads(
        self,
        *,
        status: ThreadStatus | Sequence[ThreadStatus] | None = None,
        active_after: float | None = None,
        active_before: float | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ThreadPage:
        """Return a page of the store's threads, most recent activity first.

        See ``StateStore.list_threads``; the answer comes from the store's index.
        """
        async with Locked(self, exclusive=False):
            infos = self._log.records.thread_infos()
        return page_threads(
            infos,
            status=status,
            active_after=active_after,
            active_before=active_before,
            limit=limit,
            cursor=cursor,
        )

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete every record and branch of a thread; return ``False`` if it had none.

        The file is rewritten without the thread's lines, so they are gone from the disk
        (see ``nodestep.store._rewrite``); a kill during it leaves the old file or the new.
        """
        self._check_writable("delete", thread_id)
        async with Locked(self, exclusive=True):
            if not self._log.records.has_thread(thread_id):
                return False

            def keep(record: Record) -> bool:
                return bool(record.get("thread") != thread_id)

            self._rewrite(keep)
        return True

    async def prune(
        self,
        thread_id: str | None = None,
        *,
        keep_last: int | None = None,
        older_than: float | None = None,
    ) -> int:
        """Drop history before a checkpoint, keeping every branch loadable; return the count.

        See ``StateStore.prune``. The file is rewritten without the dropped lines, as by
        ``delete_thread``; when nothing is dropped it is left as it is.
        """
        check_prune(keep_last, older_than)
        if thread_id is not None or not self.read_only:
            self._check_writable("prune", "" if thread_id is None else thread_id)
        else:
            raise StateStoreError(
                f"Cannot prune the threads of {self.path}: the store was opened with "
                f"read_only=True, and only reads. Nothing was dropped; open the file with "
                f"FilesystemStateStore(path) to prune it.",
                path=str(self.path),
            )
        async with Locked(self, exclusive=True):
            index = self._log.records
            cuts = index.prune_cuts(thread_id, keep_last, older_than)
            if not cuts:
                return 0
            dropped = sum(cut - index.branches[key].first_seq for key, cut in cuts.items())

            def keep(record: Record) -> bool:
                cut = cuts.get((record["thread"], record["branch"]))
                if cut is None or record["type"] == "branch":
                    return True
                # A start line of an earlier prune makes way for the new one.
                return bool(record["type"] != "start" and record["seq"] >= cut)

            self._rewrite(keep, cuts)
        return dropped

    def _rewrite(
        self, keep: _rewrite.Keep, starts: dict[tuple[str, str], int] | None = None
    ) -> None:
        """Rewrite the file through ``keep``; the caller holds the exclusive lock.

        The store then has the new file open, and indexes it on its next call.
        """
        path: Path = self.path
        try:
            _rewrite.rewrite(path, self._fd, self._log.end, keep, starts)
        except OSError as e:
            raise StateStoreError(
                f"Cannot rewrite {path} without the records to drop: {e.strerror or e} (errno "
                f"{e.errno}). Nothing was dropped: the file is as it was. Free disk space (the "
                f"rewrite needs room for a copy) or check the directory's permissions, and "
                f"try again.",
                path=str(path),
            ) from e
        self._log.seen = None  # the next call follows the new file at the path
