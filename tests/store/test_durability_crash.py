"""FilesystemStateStore(fsync=True) keeps every acknowledged append through a crash.

Two crashes: a real ``kill -9`` of a writer process (what the operating system already has
survives), and a simulated power loss, where only what a finished flush covered is sure
to be on the disk. The simulation reads the I/O seam's log (``_io.FaultPlan.log``) of a
run of concurrent appends and rebuilds every file a power loss could leave: the file as
of the last finished flush, plus any prefix of the bytes written after it (or that many
zero bytes, as a file system that grew the file but lost its data leaves it).

Each randomized test prints its seed; set ``NODESTEP_SEED`` to repeat one, and
``NODESTEP_CRASHES`` for more kills than the 20 of a normal run.
"""

from __future__ import annotations

import os
import random
import time
from itertools import pairwise
from pathlib import Path

import anyio
import pytest
from forking import in_child, kill_and_collect, needs_fork, runner

from nodestep.store import FilesystemStateStore
from nodestep.store._file import io as _io
from nodestep.testing import event, seqs

pytestmark = pytest.mark.slow

run = runner("asyncio")

WRITERS = 8  # concurrent tasks in the writer, one thread each: their appends share flushes


def _seed() -> random.Random:
    seed = int(os.environ.get("NODESTEP_SEED", time.time_ns() % 2**32))
    print(f"seed: {seed} (set NODESTEP_SEED to repeat)")
    return random.Random(seed)


async def _append_forever(store: FilesystemStateStore, thread: str, write_end: int) -> None:
    last = await store.last_sequence(thread, "main")
    while True:
        await store.append(thread, "main", [event(last + 1, thread, text="x" * 300)], after=last)
        last += 1
        os.write(write_end, f"{thread} {last}\n".encode())  # only once append returned


@needs_fork
def test_kill_9_of_a_writer_loses_no_acknowledged_append(tmp_path: Path) -> None:
    rng = _seed()
    path = tmp_path / "history.jsonl"
    FilesystemStateStore(path, fsync=True)
    crashes = int(os.environ.get("NODESTEP_CRASHES", "20"))
    acked: dict[str, int] = {}
    for _ in range(crashes):
        read_end, write_end = os.pipe()

        def child(read_end: int = read_end, write_end: int = write_end) -> int:
            os.close(read_end)
            store = FilesystemStateStore(path, fsync=True)

            async def go() -> None:
                async with anyio.create_task_group() as tg:
                    for k in range(WRITERS):
                        tg.start_soon(_append_forever, store, f"t{k}", write_end)

            run(go())
            return 0

        pid = in_child(child)
        for line in kill_and_collect(pid, read_end, write_end, rng.uniform(0.005, 0.1)):
            thread, seq = line.split()
            acked[thread] = max(acked.get(thread, 0), int(seq))

        store = FilesystemStateStore(path, fsync=True)  # as a new process would open it
        for k in range(WRITERS):
            thread = f"t{k}"
            records = run(store.read(thread, "main"))
            last = len(records)
            assert seqs(records) == list(range(1, last + 1))
            assert last >= acked.get(thread, 0), f"{thread}: an acknowledged append is missing"
            assert last <= acked.get(thread, 0) + 1, f"{thread}: two unacknowledged appends"
            acked[thread] = last
        run(store.append("t0", "main", [event(acked["t0"] + 1, "t0")], after=acked["t0"]))
        acked["t0"] += 1
        run(store.aclose())
        assert path.read_bytes().endswith(b"\n")
    print(f"kill -9: {crashes}/{crashes} crashes recovered, {sum(acked.values())} appends kept")


def _logged_run(path: Path) -> tuple[list[tuple[str, int, int]], bytes]:
    """Run concurrent appends with fsync=True; return the I/O log (with acks) and the file."""
    store = FilesystemStateStore(path, fsync=True)
    plan = _io.faults = _io.FaultPlan()

    async def writer(thread: str) -> None:
        for seq in range(1, 6):
            await store.append(thread, "main", [event(seq, thread, text="y" * 40)], after=seq - 1)
            offset, size = store._log.records.locations(thread, "main", seq, seq)[0]
            plan.log.append(("ack", offset, size))

    async def go() -> None:
        async with anyio.create_task_group() as tg:
            for k in range(6):
                tg.start_soon(writer, f"t{k}")
        await store.aclose()

    try:
        anyio.run(go)
    finally:
        _io.faults = None
    return plan.log, path.read_bytes()


def test_every_file_a_power_loss_can_leave_opens_with_every_acknowledged_append(
    tmp_path: Path,
) -> None:
    log, final = _logged_run(tmp_path / "history.jsonl")
    # Where a crash may cut the file: at each line's end, one byte on either side, and its
    # middle (every byte offset is tried the same way, but far slower).
    ends = [i + 1 for i, byte in enumerate(final) if byte == ord("\n")]
    cuts = sorted({c for a, b in pairwise([0, *ends]) for c in (a + 1, (a + b) // 2, b - 1, b)})
    images: dict[bytes, int] = {}  # each file a crash can leave: the bytes it must keep
    done = durable = 0
    started: list[int] = []
    acked_ends: list[int] = []
    crash_points = 0
    for op, offset, size in log:
        if op == "written":
            done = max(done, offset + size)
        elif op == "fsync":
            started.append(done)
        elif op == "fsynced":
            durable = max(durable, started.pop(0))
        elif op == "ack":
            acked_ends.append(offset + size)
        # A crash here leaves the file up to ``durable``, plus any prefix of the rest.
        crash_points += 1
        must_keep = max(acked_ends, default=0)
        assert must_keep <= durable, "an append was acknowledged before a flush covered it"
        for cut in (c for c in cuts if durable <= c <= done):
            for image in (final[:cut], final[:durable] + b"\0" * (cut - durable)):
                images[image] = max(images.get(image, 0), must_keep)
    image_path = tmp_path / "image.jsonl"
    for image, must_keep in images.items():
        image_path.write_bytes(image)
        store = FilesystemStateStore(image_path)  # repairs the tail, as after a reboot
        assert image_path.stat().st_size >= must_keep, "an acknowledged append was cut"
        for k in range(6):
            records = run(store.read(f"t{k}", "main"))
            assert seqs(records) == list(range(1, len(records) + 1))
        run(store.aclose())
    print(f"power loss: {len(images)} images from {crash_points} crash points, all valid")
