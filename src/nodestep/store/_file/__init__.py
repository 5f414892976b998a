"""The file store: every thread's history in one JSON Lines file that processes share.

``store.FilesystemStateStore`` holds the open file (its descriptors and locks) and hands the
descriptor to the objects that do the rest, each through its own methods:
``log.IndexedLog`` (the file's records, indexed: catching up, repairing, appending,
reading), ``group_commit.GroupCommit`` (the shared flushes of ``fsync=True``) and
``leases.LeaseFile`` (the leases, in ``<path>.leases``); ``rewrite`` drops records for
``delete_thread`` and ``prune``, and ``persisted`` keeps the index on disk (``<path>.idx``).
``locks`` waits for a held lock off the event loop. Every system call on the history file
passes ``io``, the seam where tests inject faults. The lines are ``nodestep.store._codec``'s;
the format and its guarantees are described in ``docs/stores.md``.
"""
