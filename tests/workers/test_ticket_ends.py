"""A ticket's events of a job that ends without a run say so at once, as ``result()`` does."""

from __future__ import annotations

import pytest
from workers_helpers import Workers

from nodestep import GraphExecutionError, Resume
from nodestep.workers import RunQueue

pytestmark = pytest.mark.anyio


async def test_events_of_a_run_cancelled_before_a_worker_took_it_end_saying_so(
    queue_dsn: str, workers: Workers
) -> None:
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        ticket = await queue.submit("queued_graphs:ledger", "e", {"items": ["a"]})
        assert await ticket.cancel()
        with pytest.raises(GraphExecutionError, match="was cancelled before its run started"):
            async for _ in ticket.events(timeout=60):
                pass


@pytest.mark.slow
async def test_events_of_a_resume_that_failed_before_its_run_end_saying_so(
    queue_dsn: str, workers: Workers
) -> None:
    workers.start(1)
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        # nothing to answer: the job fails before it stores a run
        ticket = await queue.submit("queued_graphs:approvals", "n", resume=Resume("yes"))
        with pytest.raises(GraphExecutionError, match="ended 'failed' without storing a run"):
            async for _ in ticket.events(timeout=60):
                pass
