"""Queued runs served by real worker processes over a real PostgreSQL queue."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from workers_helpers import Workers

from nodestep import GraphConfigError, GraphExecutionError, Resume
from nodestep.workers import RunOutcome, RunQueue, RunTicket

pytestmark = pytest.mark.anyio

GRAPH = "queued_graphs:ledger"


def _wait_for(path: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} did not appear within {seconds} s")
        time.sleep(0.02)  # polls for the file the worker writes: what this waits for


async def _stored_finished(graph: Any, thread: str, node: str, count: int) -> None:
    """Wait until ``thread`` holds ``count`` ``task_finished`` records of ``node``."""
    deadline = time.monotonic() + 60
    while True:
        records = await graph.state_store.read(thread, "main")
        if sum(r["type"] == "task_finished" and r["node"] == node for r in records) >= count:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{node}'s task_finished #{count} was not stored within 60 s")
        await anyio.sleep(0.02)  # polls the store: the worker says nothing when it stored one


async def _steps_once(graph: Any, thread: str, runs: int) -> list[str]:
    """Check that no step of ``thread`` was lost or stored twice; return the inputs' items.

    Sequences run 1..N with no gap; every turn (a run of input, and any continuation of
    it) completed supersteps 0 and 1 once each, in order (``count``, then ``audit`` and
    ``slow`` together), and finished each task at most once; every request key started
    one turn.
    """
    records = await graph.state_store.read(thread, "main")
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    turns: list[list[dict[str, Any]]] = []
    for record in records:
        if record["type"] == "run_started" and "input" in record:
            turns.append([])
        if turns:  # the thread's first checkpoint comes before any turn
            turns[-1].append(record)
    assert len(turns) == runs
    for turn in turns:
        steps = [r["step"] for r in turn if r["type"] == "superstep_completed"]
        assert steps == [0, 1], steps
        finished = [(r["step"], r["node"]) for r in turn if r["type"] == "task_finished"]
        assert len(finished) == len(set(finished)), finished
    keys = [turn[0]["request"] for turn in turns]
    assert len(set(keys)) == runs
    return [item for turn in turns for item in turn[0]["input"]["items"]]


@pytest.mark.slow
async def test_four_workers_run_200_queued_runs_over_20_threads_once_each_in_order(
    workers: Workers, queue_dsn: str, tmp_path: Path
) -> None:
    workers.start(4)
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        tickets = []
        for i in range(200):
            ticket = await queue.submit(GRAPH, f"t{i % 20}", {"items": [f"r{i}"]})
            tickets.append(ticket)
        outcomes = [await t.result(timeout=120) for t in tickets]
    assert {o.status for o in outcomes} == {"completed"}
    import queued_graphs

    graph = queued_graphs.ledger
    for t in range(20):
        state = (await graph.get_state(f"t{t}")).value
        assert state.items == [f"r{i}" for i in range(t, 200, 20)]  # each once, in queue order
        assert state.count == 10
        history = await graph.history(f"t{t}")
        kinds = Counter(event.type for event in history.events)
        assert kinds["run_completed"] == 10 and kinds["run_started"] == 10
        assert await _steps_once(graph, f"t{t}", 10) == [f"r{i}" for i in range(t, 200, 20)]
    audited = Counter((tmp_path / "audit.log").read_text().split())
    assert len(audited) == 200 and set(audited.values()) == {1}


@pytest.mark.slow
async def test_a_worker_killed_mid_superstep_is_replaced_and_its_thread_completes(
    workers: Workers, queue_dsn: str, tmp_path: Path
) -> None:
    import queued_graphs

    (first,) = workers.start(1)
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        done = await queue.submit(GRAPH, "k", {"items": ["before"]})
        assert (await done.result(timeout=60)).status == "completed"
        ticket = await queue.submit(GRAPH, "k", {"items": ["stall-1"]})
        await anyio.to_thread.run_sync(_wait_for, tmp_path / "stall-1.started", 60)
        # audit, the other task of the superstep, has finished and is stored
        await _stored_finished(queued_graphs.ledger, "k", "audit", 2)
        assert int((tmp_path / "stall-1.started").read_text()) == first.pid
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        (tmp_path / "stall-1.released").write_text("")
        workers.start(1)  # the replacement
        outcome = await ticket.result(timeout=60)
    assert outcome.status == "completed"
    assert outcome.snapshot.value.items == ["before", "stall-1"]
    assert outcome.snapshot.value.checked == ["before", "stall-1"]
    # the task that finished before the kill did not run again
    assert (tmp_path / "audit.log").read_text().split() == ["before", "stall-1"]
    assert await _steps_once(queued_graphs.ledger, "k", 2) == ["before", "stall-1"]
    records = await queued_graphs.ledger.state_store.read("k", "main")
    continued = [r for r in records if r["type"] == "run_started" and "input" not in r]
    assert len(continued) == 1  # the replacement continued the thread, once


async def test_submit_refuses_input_and_resume_together(queue_dsn: str, workers: Workers) -> None:

    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        with pytest.raises(GraphConfigError, match="input= or resume=, not both"):
            await queue.submit(GRAPH, "x", {"items": ["a"]}, resume=Resume("yes"))


async def test_submit_names_a_graph_path_that_cannot_be_imported(
    queue_dsn: str, workers: Workers
) -> None:
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        with pytest.raises(GraphConfigError, match=r"'package\.module:attribute'"):
            await queue.submit("queued_graphs.ledger", "x", {"items": ["a"]})
        with pytest.raises(GraphConfigError, match="Cannot import module 'no_such_module'"):
            await queue.submit("no_such_module:graph", "x", {"items": ["a"]})
        with pytest.raises(GraphConfigError, match="not a nodestep Graph"):
            await queue.submit("queued_graphs:Ledger", "x", {"items": ["a"]})


def test_the_queue_lives_in_postgresql() -> None:
    with pytest.raises(GraphConfigError, match="pass a postgresql:// URL, got 'redis://x'"):
        RunQueue("redis://x")


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["postgres", "file"], indirect=True)
async def test_events_stream_the_run_as_workers_store_it(workers: Workers, queue_dsn: str) -> None:
    workers.start(1)
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        ticket = await queue.submit(GRAPH, "s", {"items": ["one"]})
        kinds = [event.type async for event in ticket.events(timeout=60)]
    assert "run_started" in kinds and kinds[-1] == "run_completed"
    assert kinds.count("superstep_completed") == 2  # count; then audit and slow together


@pytest.mark.slow
async def test_a_queued_run_pauses_and_a_queued_resume_answers_it(
    workers: Workers, queue_dsn: str
) -> None:
    workers.start(1)
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        first = await queue.submit("queued_graphs:approvals", "p", {"request": "refund"})
        paused = await first.result(timeout=60)
        assert paused.status == "interrupted"
        (pending,) = paused.snapshot.interrupts.values()
        assert pending.payload == "approve refund?"
        second = await queue.submit(
            "queued_graphs:approvals", "p", resume=Resume("yes"), request_key="answer-1"
        )
        done = await second.result(timeout=60)
        # submitted twice by its caller, with its key: the second returns the first's result
        again = await queue.submit(
            "queued_graphs:approvals", "p", resume=Resume("yes"), request_key="answer-1"
        )
        assert (await again.result(timeout=60)).snapshot.value.answer == "yes"
        # without the key it is another resume, and the thread has nothing left to answer
        other = await queue.submit("queued_graphs:approvals", "p", resume=Resume("yes"))
        with pytest.raises(GraphExecutionError, match="ended 'failed' without storing a run"):
            await other.result(timeout=60)
    assert done.status == "completed" and done.snapshot.value.answer == "yes"


async def _killed_after_its_run(
    workers: Workers, tmp_path: Path, kind: str, ticket: RunTicket
) -> RunOutcome:
    """Kill the stalling worker once it ran ``ticket``'s job; a new worker gets the job."""
    stalling = workers.start_stalling()
    await anyio.to_thread.run_sync(_wait_for, tmp_path / f"{kind}.ran", 60)
    os.kill(stalling.pid, signal.SIGKILL)  # the run's end is stored, the job's end is not
    stalling.wait()
    assert await ticket.status() == "doing"
    workers.start(1)  # puts the silent worker's job back in the queue, and takes it
    outcome = await ticket.result(timeout=60)
    assert await ticket.status() == "succeeded"
    return outcome


@pytest.mark.slow
async def test_a_resume_delivered_again_after_its_worker_died_answers_one_interrupt(
    workers: Workers, queue_dsn: str, tmp_path: Path
) -> None:
    import queued_graphs

    chat = queued_graphs.chat
    await chat.ainvoke({}, thread_id="r")  # paused at turn 1
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        ticket = await queue.submit("queued_graphs:chat", "r", resume=Resume("a1"))
        outcome = await _killed_after_its_run(workers, tmp_path, "resume", ticket)
    # the redelivery found its run (paused at turn 2) and did not answer turn 2 with "a1"
    assert (outcome.status, outcome.snapshot.value.answers) == ("interrupted", ["a1"])
    state = await chat.get_state("r")
    assert (state.status, state.value.answers) == ("paused", ["a1"])
    records = await chat.state_store.read("r", "main")
    assert sum(r["type"] == "run_started" and "answers" in r for r in records) == 1


@pytest.mark.slow
async def test_a_continuation_delivered_again_after_its_worker_died_succeeds_once(
    workers: Workers, queue_dsn: str, tmp_path: Path
) -> None:
    import queued_graphs

    flaky = queued_graphs.flaky
    (tmp_path / "down").write_text("")
    with pytest.raises(ConnectionError, match="the service is down"):
        await flaky.ainvoke({}, thread_id="f")
    (tmp_path / "down").unlink()
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        ticket = await queue.submit("queued_graphs:flaky", "f")
        outcome = await _killed_after_its_run(workers, tmp_path, "continue", ticket)
        assert (outcome.status, outcome.snapshot.value.done) == ("completed", 1)
        assert outcome.run_id is not None  # the run this job's first delivery made
        # a continuation of its own finds the thread completed: that job fails, as it should
        other = await queue.submit("queued_graphs:flaky", "f")
        with pytest.raises(GraphExecutionError, match="ended 'failed' without storing a run"):
            await other.result(timeout=60)
    records = await flaky.state_store.read("f", "main")
    assert [r["type"] for r in records].count("run_completed") == 1


@pytest.mark.slow
async def test_a_cancelled_run_stops_in_its_worker_and_the_worker_serves_on(
    workers: Workers, queue_dsn: str, tmp_path: Path
) -> None:
    import queued_graphs

    (proc,) = workers.start(1)
    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        ticket = await queue.submit("queued_graphs:waiting", "c", {"label": "c1"})
        await anyio.to_thread.run_sync(_wait_for, tmp_path / "c1.started", 60)
        assert await ticket.cancel()
        outcome = await ticket.result(timeout=30)  # well before the node's 60 s sleep ends
        assert outcome.status == "stopped" and outcome.snapshot.value.done is False
        assert await ticket.status() == "aborted"
        assert not await ticket.cancel()  # it ended: nothing left to cancel
        kinds = [event.type async for event in ticket.events(timeout=30)]
        assert kinds == ["run_started", "run_stopped"]
        records = await queued_graphs.waiting.state_store.read("c", "main")
        assert [r.get("reason") for r in records if r["type"] == "run_stopped"] == ["cancelled"]
        # the same worker takes the next job
        after = await queue.submit(GRAPH, "d", {"items": ["after"]})
        assert (await after.result(timeout=60)).status == "completed"
        # and a continuation goes on from where the cancel stopped the run
        (tmp_path / "c1.started").unlink()
        again = await queue.submit("queued_graphs:waiting", "c")
        await anyio.to_thread.run_sync(_wait_for, tmp_path / "c1.started", 60)
        assert await again.cancel()
        assert (await again.result(timeout=30)).status == "stopped"
    assert proc.poll() is None


@pytest.mark.slow
async def test_a_run_cancelled_before_a_worker_takes_it_never_runs(
    workers: Workers, queue_dsn: str, tmp_path: Path
) -> None:
    import queued_graphs

    async with RunQueue(queue_dsn, queue=workers.queue) as queue:
        ticket = await queue.submit("queued_graphs:waiting", "n", {"label": "n1"})
        assert await ticket.cancel()
        assert await ticket.status() == "cancelled"
        with pytest.raises(GraphExecutionError, match=r"was cancelled before its run started"):
            await ticket.result(timeout=30)
        workers.start(1)
        later = await queue.submit(GRAPH, "m", {"items": ["later"]})
        assert (await later.result(timeout=60)).status == "completed"  # served after it
    assert not (tmp_path / "n1.started").exists()
    assert await queued_graphs.waiting.state_store.read("n", "main") == []
