"""A damaged page of an SQLite history never gives a silently shorter history.

The damage is real: bytes of one page of the database file are overwritten, as a bad disk
or a stray write would. A leaf page whose cell count is cut loses rows. In a file of the
older layout (events ``WITHOUT ROWID``) SQLite does not notice, and the store finds the gap
in the numbering; in a new file (events a rowid table) SQLite finds the key's index naming
a row that is gone. Either way every read that crosses the page fails, naming the file,
and ``check_integrity`` finds the lost rows. Each test runs on both layouts.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import anyio
import pytest
from sqlite_layouts import LAYOUTS, sqlite_store

from nodestep import SQLiteStateStore, StateStoreError
from nodestep.testing import checkpoint, events

pytestmark = pytest.mark.anyio

LAST = 3000


def _history(path: Path, layout: str) -> None:
    """A thread of LAST records: a few hundred pages of the events table."""
    store = sqlite_store(path, layout)

    async def fill() -> None:
        await store.append("t1", "main", [checkpoint(1)], after=0)
        await store.append("t1", "main", events(2, LAST), after=1)
        await store.aclose()

    anyio.run(fill)


def _page_of(path: Path, needle: bytes) -> tuple[int, int]:
    """Return (byte offset, page size) of the first page holding ``needle``."""
    with sqlite3.connect(path) as conn:
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    conn.close()
    offset = path.read_bytes().index(needle)
    return offset - offset % size, size


def _leaf_page_near(path: Path, seq: int) -> int:
    """Return the byte offset of a leaf page holding record ``seq`` or the next one found whole.

    The leaf pages of a rowid table are of type 0x0D, those of a WITHOUT ROWID table (an
    index b-tree) 0x0A. A row can also stand in an interior page of the latter, as the key
    between two of its children (its keys are whole rows), and a row whose bytes run
    on into an overflow page can have its ``"seq":N,`` cut in two there. Where the pages
    split depends on the rows' sizes (their timestamps among them), so the search moves on
    to the next seq until one stands whole in a leaf page.
    """
    with sqlite3.connect(path) as conn:
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    conn.close()
    data = path.read_bytes()
    for candidate in range(seq, LAST + 1):
        needle = b'"seq":%d,' % candidate
        offset = data.find(needle)
        while offset != -1:
            start = offset - offset % size
            if data[start] in (0x0A, 0x0D):  # a leaf page of either kind of b-tree
                return start
            offset = data.find(needle, offset + 1)
    raise AssertionError(f"no leaf page holds a record from seq {seq} on")


def _cut_cell_count(path: Path, seq: int) -> None:
    """Halve the cell count of the leaf page holding record ``seq`` (or one after it)."""
    start = _leaf_page_near(path, seq)
    data = bytearray(path.read_bytes())
    cells = int.from_bytes(data[start + 3 : start + 5], "big")
    data[start + 3 : start + 5] = (cells // 2).to_bytes(2, "big")
    path.write_bytes(bytes(data))


def _garble(path: Path, seq: int) -> None:
    """Overwrite the middle of the page holding record ``seq`` with garbage."""
    start, size = _page_of(path, b'"seq":%d,' % seq)
    data = bytearray(path.read_bytes())
    data[start + size // 4 : start + size // 2] = b"\xa5" * (size // 4)
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module", params=LAYOUTS)
def sound(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite") / f"sound-{request.param}.db"
    _history(path, request.param)
    return path


@pytest.fixture
def damaged(sound: Path, tmp_path: Path) -> Path:
    path = tmp_path / sound.name.replace("sound", "damaged")
    path.write_bytes(sound.read_bytes())
    _cut_cell_count(path, LAST // 2)
    return path


async def test_a_page_that_lost_rows_fails_every_read_naming_the_thread_and_seqs(
    damaged: Path,
) -> None:
    store = SQLiteStateStore(damaged)
    gap = r"thread 't1', branch 'main' is missing records: after seq (\d+) the next record read"
    for read in (store.read, store.read_tail):
        with pytest.raises(StateStoreError) as caught:
            await read("t1", "main")
        message = str(caught.value)
        assert str(damaged) in message and "check_integrity" in message
        if "older" in damaged.name:  # SQLite does not notice: the numbering does
            assert re.search(gap, message), message
            after = int(message.split("after seq ")[1].split()[0])
            assert f"expected seq {after + 1}" in message
        else:  # the key's index names rows the table lost
            assert "malformed; the file is damaged" in message, message
    # Reads that do not cross the lost rows still work.
    assert len(await store.read("t1", "main", stop=100)) == 100
    await store.aclose()


def test_check_integrity_finds_the_lost_rows_and_a_sound_file_has_no_problem(
    sound: Path, damaged: Path
) -> None:
    assert SQLiteStateStore(sound).check_integrity() == []
    assert SQLiteStateStore(sound).check_integrity(full=True) == []
    problems = SQLiteStateStore(damaged).check_integrity()
    assert any("page" in p for p in problems), problems  # quick_check's own finding
    missing = [p for p in problems if p.startswith("thread 't1', branch 'main' holds ")]
    assert len(missing) == 1 and missing[0].endswith("are missing"), problems


def test_a_store_opened_with_check_refuses_a_damaged_file(sound: Path, damaged: Path) -> None:
    SQLiteStateStore(sound, check=True)
    with pytest.raises(
        StateStoreError, match=r"damaged-(new|older)\.db is damaged: .*are missing"
    ) as e:
        SQLiteStateStore(damaged, check=True)
    assert e.value.path == str(damaged)


async def test_a_garbled_page_fails_reads_with_a_store_error(sound: Path, tmp_path: Path) -> None:
    path = tmp_path / "garbled.db"
    path.write_bytes(sound.read_bytes())
    _garble(path, LAST // 3)
    store = SQLiteStateStore(path)
    with pytest.raises(StateStoreError, match=r"garbled\.db"):
        await store.read("t1", "main")
    assert store.check_integrity() != []
    await store.aclose()
