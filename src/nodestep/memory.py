"""Long-term memory: JSON items under namespaces, shared by every thread of every graph.

A thread's state lives in its history; what an agent should remember across threads (a
user's preferences, facts it learned) lives in a ``MemoryStore``. Nodes reach it as
``ctx.memory`` when a graph is given one (``Graph(..., memory=store)`` or
``invoke(..., memory=store)``); it is never written to the history. See
``docs/memory.md``.
"""

from nodestep._memory.contract import MemoryStore
from nodestep._memory.embeddings import Embeddings
from nodestep._memory.filesystem import FilesystemMemoryStore
from nodestep._memory.filters import OPERATORS
from nodestep._memory.in_memory import InMemoryMemoryStore
from nodestep._memory.items import Item, SearchItem
from nodestep._memory.postgres import PostgresMemoryStore
from nodestep._memory.sqlite import SQLiteMemoryStore
from nodestep._memory.urls import open_memory
from nodestep._public import publish as _publish

__all__ = [
    "OPERATORS",
    "Embeddings",
    "FilesystemMemoryStore",
    "InMemoryMemoryStore",
    "Item",
    "MemoryStore",
    "PostgresMemoryStore",
    "SQLiteMemoryStore",
    "SearchItem",
    "open_memory",
]

_publish(__name__, __all__, globals())
