"""A run cancelled while its worker is dead ends ``stopped``, not as a failure."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import anyio
import pytest
from workers_helpers import Workers

from nodestep.workers import RunQueue

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _wait_for(path: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} did not appear within {seconds} s")
        time.sleep(0.02)  # polls for the file the worker writes: what this waits for


async def test_a_run_cancelled_while_its_worker_is_dead_ends_stopped_where_it_was(
    workers: Workers, queue_dsn: str, tmp_path: Path
) -> None:
    (first,) = workers.start(1)
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        ticket = await queue.submit("queued_graphs:waiting", "k", {"label": "k1"})
        await anyio.to_thread.run_sync(_wait_for, tmp_path / "k1.started", 60)
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        assert await ticket.cancel()  # still "doing": its worker never said otherwise
        workers.start(1)  # finds the dead worker's job
        outcome = await ticket.result(timeout=60)
        assert outcome.status == "stopped" and outcome.snapshot.value.done is False
        assert outcome.run_id is not None
        assert await ticket.status() == "aborted"
        assert [event.type async for event in ticket.events(timeout=60)] == ["run_started"]
