"""The table layouts an SQLite history file can have, for tests that run on each.

nodestep makes a new file with the events as a rowid table and the leases ``WITHOUT
ROWID``; files made before have the events ``WITHOUT ROWID`` and the leases as a rowid
table, and keep that layout. The statements are the same for both.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from nodestep import SQLiteStateStore
from nodestep.store._sql import ops

OLDER_SCHEMA = """
CREATE TABLE nodestep_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE nodestep_events (
    thread TEXT NOT NULL, branch TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL,
    kind TEXT NOT NULL, request TEXT, line BLOB NOT NULL, ts REAL NOT NULL, status TEXT,
    PRIMARY KEY (thread, branch, seq)
) WITHOUT ROWID;
CREATE INDEX nodestep_event_ids ON nodestep_events (thread, id);
CREATE INDEX nodestep_checkpoints ON nodestep_events (thread, branch, seq)
    WHERE kind = 'checkpoint';
CREATE INDEX nodestep_requests ON nodestep_events (thread, branch, request)
    WHERE request IS NOT NULL;
CREATE TABLE nodestep_branches (
    n INTEGER PRIMARY KEY AUTOINCREMENT, thread TEXT NOT NULL, branch TEXT NOT NULL,
    parent TEXT NOT NULL, from_event TEXT NOT NULL, from_seq INTEGER NOT NULL,
    ts REAL NOT NULL, UNIQUE (thread, branch)
);
CREATE TABLE nodestep_leases (
    thread TEXT NOT NULL, branch TEXT NOT NULL, id TEXT NOT NULL, holder TEXT NOT NULL,
    expires REAL NOT NULL, ttl REAL NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL,
    pid_ns INTEGER NOT NULL, PRIMARY KEY (thread, branch)
);
"""
"""The tables as nodestep made them before the events became a rowid table."""

LAYOUTS = ("new", "older")


def make_older_file(path: Path) -> None:
    """Make an empty history file of the older layout, as an earlier nodestep left it."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(OLDER_SCHEMA)
        conn.execute("INSERT INTO nodestep_meta VALUES ('schema', ?)", (str(ops.SCHEMA_VERSION),))
    finally:
        conn.close()


def sqlite_store(path: Path, layout: str) -> SQLiteStateStore:
    """A store on a new file of ``layout`` (one of ``LAYOUTS``)."""
    if layout == "older":
        make_older_file(path)
    return SQLiteStateStore(path)


def layout_of(path: Path) -> dict[str, bool]:
    """Whether each of the two tables whose layout changed is ``WITHOUT ROWID``."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE name IN "
            "('nodestep_events', 'nodestep_leases')"
        ).fetchall()
    finally:
        conn.close()
    return {name: "WITHOUT ROWID" in sql for name, sql in rows}
