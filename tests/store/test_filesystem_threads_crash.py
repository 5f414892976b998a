"""A process killed (kill -9) while it prunes or deletes: the file is before or after, whole.

Children are forked from this process and open their own store (see ``forking``). After
each kill a fresh store opens the file, as a new process would, and every thread must be
either as it was or as the prune leaves it: its records a suffix of the original ones,
byte for byte, starting at a checkpoint and ending at the same last record.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from forking import in_child, kill_and_collect, needs_fork, runner, wait

from nodestep.store import FilesystemStateStore
from nodestep.store._file import io as _io
from nodestep.testing import checkpoint, event

pytestmark = [pytest.mark.slow, needs_fork]

run = runner("asyncio")

THREADS = 40
LAST = 60


def fill(path: Path) -> dict[str, list[dict[str, object]]]:
    """Write THREADS threads of LAST records (a checkpoint every 10); return them."""
    store = FilesystemStateStore(path)
    written = {}
    for k in range(THREADS):
        thread = f"t{k}"
        records = [
            checkpoint(seq, thread) if seq % 10 == 1 else event(seq, thread, pad="x" * 200)
            for seq in range(1, LAST + 1)
        ]
        run(store.append(thread, "main", records, after=0))
        written[thread] = records
    run(store.aclose())
    return written


def check_whole(path: Path, written: dict[str, list[dict[str, object]]]) -> set[int]:
    """Check every thread is a checkpoint-started suffix of what was written; return starts."""
    store = FilesystemStateStore(path)
    starts = set()
    for thread, records in written.items():
        kept = run(store.read(thread, "main"))
        first = kept[0]["seq"]
        assert kept == records[first - 1 :], f"{thread} is not a suffix of its history"
        assert kept[0]["type"] == "checkpoint"
        starts.add(first)
    run(store.aclose())
    return starts


@pytest.mark.parametrize(
    ("op", "at"),
    [("pread", 1), ("write", 1), ("fsync", 1), ("rename", 1), ("fsync_dir", 1)],
)
def test_a_crash_at_each_step_of_a_rewrite_leaves_the_old_file_or_the_new(
    tmp_path: Path, op: str, at: int
) -> None:
    path = tmp_path / "history.jsonl"
    written = fill(path)

    def child() -> int:
        store = FilesystemStateStore(path)
        _io.faults = _io.FaultPlan(fail_op=op, fail_at=at, crash=True)
        run(store.prune(keep_last=5))
        return 3  # not reached: the plan kills the process first

    assert wait(in_child(child)) < 0  # killed by SIGKILL
    starts = check_whole(path, written)
    assert starts == ({51} if op == "fsync_dir" else {1})  # renamed only before fsync_dir
    store = FilesystemStateStore(path)
    assert run(store.prune(keep_last=5)) == (0 if op == "fsync_dir" else THREADS * 50)
    assert [p.name for p in tmp_path.iterdir()] == ["history.jsonl"]  # no temporary left


def _prune_and_delete(path: Path, write_end: int, linger: bool) -> int:
    """The child's work: five prunes and a delete, each said on the pipe when done."""
    store = FilesystemStateStore(path)
    for keep in (45, 35, 25, 15, 5):
        run(store.prune(keep_last=keep))
        os.write(write_end, f"pruned {keep}\n".encode())
    run(store.delete_thread("t0"))
    os.write(write_end, b"deleted\n")
    if linger:  # waits for its kill, which may so come after the work too
        time.sleep(60)  # held until the kill; 60 s bounds one that never comes
    return 0


def test_kill_9_at_random_moments_of_prunes_and_deletes_never_tears_the_file(
    tmp_path: Path,
) -> None:
    rng = random.Random(1515)
    path = tmp_path / "history.jsonl"
    # How long the work takes on this machine, so the kills fall all over it.
    fill(path)
    read_end, write_end = os.pipe()
    began = time.monotonic()
    assert wait(in_child(lambda: _prune_and_delete(path, write_end, False))) == 0
    took = time.monotonic() - began
    os.close(read_end)
    os.close(write_end)
    path.unlink()
    cut_at: dict[int, int] = {}
    for _ in range(12):
        written = fill(path)
        read_end, write_end = os.pipe()
        pid = in_child(lambda w=write_end: _prune_and_delete(path, w, True))
        said = kill_and_collect(pid, read_end, write_end, rng.uniform(0.0, took))
        if "deleted" in said or not run(FilesystemStateStore(path).read("t0", "main")):
            written.pop("t0")  # deleted, whether or not the child lived to say so
        starts = check_whole(path, written)
        assert len(starts) == 1, "the threads of one prune are cut together"
        first = starts.pop()
        cut_at[first] = cut_at.get(first, 0) + 1
        path.unlink()
        for stale in tmp_path.glob("*.tmp"):
            stale.unlink()
    print(f"kill -9 during prunes: 12/12 files whole; first kept seq: runs {cut_at}")
