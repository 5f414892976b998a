"""An async stream its caller leaves unclosed (a ``break`` out of ``async for``, a cancel
that lands in the loop's body) does not make the caller's next call on the thread fail:
the call waits for the left stream's run to stop, then goes on.

Why it matters: ``async for`` does not close the async generator it leaves; the event
loop's finalizer closes it a few turns of the loop later, and until then its run holds the
thread. The next call, made at once, was refused with ``ThreadBusyError``.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, ThreadBusyError, node

pytestmark = [
    pytest.mark.anyio,
    # trio warns of an async generator dropped unexhausted: what these tests do on purpose.
    pytest.mark.filterwarnings("ignore:Async generator .* was garbage collected:ResourceWarning"),
]


class Essay(BaseState):
    draft: str = ""
    words: int = 0


def essay_graph(runs: list[str]) -> Graph[Essay]:
    @node
    async def write(state: Essay) -> dict:
        runs.append("write")
        return {"draft": "Tea is a drink."}

    @node
    async def count(state: Essay) -> dict:
        runs.append("count")
        return {"words": len(state.draft.split())}

    return Graph(Essay, state_store=InMemoryStateStore()).flow(
        START >> write, write >> count, count >> END
    )


async def test_a_break_out_of_async_for_leaves_the_thread_to_the_next_call() -> None:
    runs: list[str] = []
    graph = essay_graph(runs)
    async for event in graph.astream({}, thread_id="t", stream_mode="updates"):
        assert event.node == "write"
        break
    result = await graph.ainvoke(None, thread_id="t")  # no ThreadBusyError
    assert result.status == "completed" and result.state.words == 4
    assert runs == ["write", "count"], "a task ran twice"
    events = (await graph.history("t")).events
    stopped = [e for e in events if e.type == "run_stopped"]
    assert [e.data["reason"] for e in stopped] == ["stream_closed"]


async def test_a_cancel_in_the_body_of_async_for_leaves_the_thread_to_the_next_call() -> None:
    runs: list[str] = []
    graph = essay_graph(runs)
    with anyio.CancelScope() as scope:
        async for _ in graph.astream({}, thread_id="t", stream_mode="updates"):
            scope.cancel()  # as a timeout that expires while the body handles an event
            await anyio.lowlevel.checkpoint()
    assert scope.cancelled_caught
    result = await graph.ainvoke(None, thread_id="t")
    assert result.status == "completed" and result.state.words == 4
    assert runs == ["write", "count"]


async def test_update_state_after_a_break_out_of_async_for_waits_for_the_run_to_stop() -> None:
    graph = essay_graph([])
    async for _ in graph.astream({}, thread_id="t", stream_mode="updates"):
        break
    await graph.update_state("t", {"draft": "Tea is a hot drink."})
    result = await graph.ainvoke(None, thread_id="t")
    assert result.state.words == 5


async def test_a_stream_its_caller_still_holds_keeps_the_thread_busy() -> None:
    graph = essay_graph([])
    events = graph.astream({}, thread_id="t", stream_mode="updates")
    async for _ in events:
        break
    with pytest.raises(ThreadBusyError):  # at once: the stream may still be asked for more
        await graph.ainvoke(None, thread_id="t")
    await events.aclose()
    result = await graph.ainvoke(None, thread_id="t")
    assert result.state.words == 4
