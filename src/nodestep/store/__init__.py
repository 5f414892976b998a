"""Stores: where threads keep their history, and what a store of your own must do.

Everything about stores has its home here: the ``StateStore`` contract and the record
helpers a back end of your own needs (see ``docs/stores.md``), the built-in back ends, and
``open_store`` and the functions that move threads between stores. The top level,
``nodestep``, re-exports the back ends and those functions.
"""

from nodestep._public import publish as _publish
from nodestep.store._checks import check_branch, check_pruned, check_records
from nodestep.store._contract import (
    REQUEST_KEY,
    AppendPipe,
    BranchRecord,
    Lease,
    Record,
    RecordPlace,
    StateStore,
)
from nodestep.store._file.store import FilesystemStateStore
from nodestep.store._memory import InMemoryStateStore
from nodestep.store._sql.postgres import PostgresStateStore
from nodestep.store._sql.sqlite import SQLiteStateStore
from nodestep.store._threads import (
    ThreadInfo,
    ThreadPage,
    ThreadStatus,
    check_prune,
    page_threads,
    prune_cut,
    status_after,
)
from nodestep.store._transfer import copy_thread, export_thread, import_thread
from nodestep.store._urls import open_store

__all__ = [
    "REQUEST_KEY",
    "AppendPipe",
    "BranchRecord",
    "FilesystemStateStore",
    "InMemoryStateStore",
    "Lease",
    "PostgresStateStore",
    "Record",
    "RecordPlace",
    "SQLiteStateStore",
    "StateStore",
    "ThreadInfo",
    "ThreadPage",
    "ThreadStatus",
    "check_branch",
    "check_prune",
    "check_pruned",
    "check_records",
    "copy_thread",
    "export_thread",
    "import_thread",
    "open_store",
    "page_threads",
    "prune_cut",
    "status_after",
]

_publish(__name__, __all__, globals())
