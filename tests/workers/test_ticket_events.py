"""``RunTicket.events`` over a real store, with the queue's job status given by the test.

The job's status decides when a stream of a stopped or failed run ends, and the race it
must survive (the end event read while the job is still ``doing``) is hard to hit on cue
with a real worker: here the queue's answers are set by the test, the history is a real
store's.
"""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from nodestep import END, START, BaseState, Graph, GraphTimeoutError, InMemoryStateStore, node
from nodestep.workers import RunTicket
from nodestep.workers._jobs import RunJob

pytestmark = pytest.mark.anyio


class Count(BaseState):
    n: int = 0


@node
async def wait(state: Count) -> dict[str, int]:
    await anyio.sleep(60)  # cancelled by the test
    return {"n": state.n + 1}


class _Jobs:
    """A job manager whose job status comes from a list; its last status stays."""

    def __init__(self, statuses: list[str]) -> None:
        self.statuses = deque(statuses)
        self.asked = 0

    async def list_jobs_async(self, **_: Any) -> list[Any]:
        self.asked += 1
        status = self.statuses.popleft() if len(self.statuses) > 1 else self.statuses[0]
        return [SimpleNamespace(status=status)]


async def _ticket(statuses: list[str]) -> tuple[RunTicket, _Jobs]:
    """A ticket of a run of input that a cancel stopped in its first superstep."""
    store = InMemoryStateStore()
    graph = Graph(Count, state_store=store).flow(START >> wait, wait >> END)
    with anyio.move_on_after(0.05):
        await graph.ainvoke({"n": 1}, thread_id="t", request_key="job-1")
    jobs = _Jobs(statuses)
    queue = SimpleNamespace(app=SimpleNamespace(job_manager=jobs), queue="q")
    job = RunJob("m:g", "t", "main", "input", {"n": 1}, request_key="job-1")
    return RunTicket(queue, 7, job, graph, 0, store), jobs  # type: ignore[arg-type]


async def test_a_stop_read_while_the_job_still_runs_ends_the_stream_when_the_job_ends() -> None:
    ticket, jobs = await _ticket(["doing", "doing", "doing", "aborted"])
    kinds = [event.type async for event in ticket.events(timeout=30, poll=0.001)]
    assert kinds == ["run_started", "run_stopped"]
    assert jobs.asked == 4 and list(jobs.statuses) == ["aborted"]
    outcome = await ticket.result(timeout=30, poll=0.001)
    assert outcome.status == "stopped" and outcome.snapshot.value.n == 1


async def test_a_stop_whose_job_goes_on_is_not_the_end_of_the_stream() -> None:
    # A stop that the job's own retry continues (a worker's shutdown): not the end yet.
    ticket, _ = await _ticket(["doing"])
    seen: list[str] = []
    with pytest.raises(GraphTimeoutError, match=r"did not end within 0\.2 s"):
        async for event in ticket.events(timeout=0.2, poll=0.01):
            seen.append(event.type)
    assert seen == ["run_started", "run_stopped"]
