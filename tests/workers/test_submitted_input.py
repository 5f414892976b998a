"""What ``RunQueue.submit`` does with a run's input: checks it, and queues its stored form."""

from __future__ import annotations

import datetime
import re

import pytest
from workers_helpers import Workers

from nodestep import GraphConfigError, Replace, Resume, StateUpdateError
from nodestep.workers import RunQueue

pytestmark = pytest.mark.anyio

GRAPH = "queued_graphs:ledger"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"bogus": 1}, "'input' wrote 'bogus', which is not a field of Ledger"),
        ({"count": "many"}, "Field 'count' got an invalid value from 'input'"),
        ({"items": "tea"}, "Field 'items' got a str from 'input'"),
        (5, "'input' passed int as an update; pass a dict"),
    ],
)
async def test_submit_refuses_input_that_does_not_fit_the_state_and_queues_nothing(
    queue_dsn: str, workers: Workers, payload: object, message: str
) -> None:
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        with pytest.raises(StateUpdateError, match=message):
            await queue.submit(GRAPH, "bad", payload)
        jobs = await queue.app.job_manager.list_jobs_async(queue=workers.queue)
    assert list(jobs) == []  # the caller hears of it, not a worker's log


@pytest.mark.slow
async def test_a_state_instance_or_a_replace_queued_as_input_runs_as_invoke_would(
    queue_dsn: str, workers: Workers
) -> None:
    from queued_graphs import Ledger  # imported once the test's store is in the environment

    workers.start(1)
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        first = await queue.submit(GRAPH, "r", Ledger(items=["tea"], count=7))
        second = await queue.submit(GRAPH, "r", {"items": Replace(["cake"])})
        one, two = await first.result(timeout=60), await second.result(timeout=60)
    assert one.status == two.status == "completed"
    assert one.snapshot.value.items == ["tea"] and one.snapshot.value.count == 1
    assert two.snapshot.value.items == ["cake"]  # replaced, not appended to ["tea"]
    assert two.snapshot.value.checked == ["tea", "cake"]


async def test_submit_refuses_an_answer_without_a_json_form_and_queues_nothing(
    queue_dsn: str, workers: Workers
) -> None:
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        with pytest.raises(GraphConfigError, match=r"Resume\(value\) cannot be queued.*object"):
            await queue.submit("queued_graphs:approvals", "o", resume=Resume(object()))
        with pytest.raises(GraphConfigError, match=r"Resume\(answers=...\) cannot be queued"):
            await queue.submit(
                "queued_graphs:approvals", "o", resume=Resume(answers={"k": object()})
            )
        assert list(await queue.app.job_manager.list_jobs_async(queue=workers.queue)) == []


@pytest.mark.slow
async def test_a_queued_answer_is_sent_in_its_json_form_as_a_stored_run_reads_it(
    queue_dsn: str, workers: Workers
) -> None:
    workers.start(1)
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        asked = await queue.submit("queued_graphs:approvals", "d", {"request": "leave"})
        assert (await asked.result(timeout=60)).status == "interrupted"
        answered = await queue.submit(
            "queued_graphs:approvals", "d", resume=Resume(datetime.date(2026, 12, 24))
        )
        outcome = await answered.result(timeout=60)
    assert outcome.status == "completed" and outcome.snapshot.value.answer == "2026-12-24"


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ({"thread_id": ""}, "thread_id must be a non-empty string, got ''. Name the thread"),
        ({"thread_id": None}, "thread_id must be a non-empty string, got None"),
        ({"thread_id": 5}, "thread_id must be a non-empty string, got 5"),
        ({"branch_id": ""}, "branch_id must be a non-empty string, got ''. Leave it out"),
        ({"request_key": ""}, "request_key must be a non-empty string, got ''"),
    ],
)
async def test_submit_refuses_ids_a_run_would_refuse_and_queues_nothing(
    queue_dsn: str, workers: Workers, ids: dict[str, object], message: str
) -> None:
    args: dict[str, object] = {"thread_id": "t", **ids}
    thread_id = args.pop("thread_id")
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        with pytest.raises(GraphConfigError, match=re.escape(message)):
            await queue.submit(GRAPH, thread_id, {"items": ["a"]}, **args)  # type: ignore[arg-type]
        assert list(await queue.app.job_manager.list_jobs_async(queue=workers.queue)) == []
