"""The SQL stores: SQLite and PostgreSQL, one set of methods over two ways to run a statement.

``store.SQLStateStore`` holds every ``StateStore`` method once; it builds the operations of
``ops`` (generators of SQL statements, no I/O) and hands each to its back end's ``_run``:
``sqlite.SQLiteStateStore`` (``sqlite3``) or ``postgres.PostgresStateStore`` (psycopg, with
``pg_loops``, the async connections of each event loop, and ``pg_pipe``, a run's appends
sent ahead of their answers).
"""
