"""The long-term memory store: JSON items under namespaces, shared across threads.

The face is ``nodestep.memory``. ``items`` holds an item and the checks of what a caller
gives (namespaces, keys, values); ``filters`` the search filter language; ``embeddings``
the interface semantic search uses; ``contract`` the ``MemoryStore`` every back end
shares; one module per back end (``in_memory``, ``filesystem``, ``sqlite``,
``postgres``); ``urls`` opens one by URL. Nothing here imports the engine: a graph hands
its memory store to its nodes (``NodeContext.memory``) without storing it.
"""
