"""Stream a run: the run loop in a task of its own, handing events over one at a time.

``astream`` is an async generator, and a generator must not hold a task group or a cancel
scope across a ``yield`` (PEP 789): the caller's code runs between yields, in the same
task, and would be cancelled by the run's scopes. So the run loop, with its task groups,
runs in a task of its own, started on the caller's event loop, and the generator only
passes events on. The two meet once per event: the run produces the next event only when
the caller asks for it, so, as with ``invoke``, no superstep starts while the caller still
handles the last event, and closing the stream stops the run right there.

Starting that task is one of the two things anyio has no call for (``_engine.backend``);
everything else here is anyio.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncGenerator

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from nodestep._engine.backend import RunTask
from nodestep._engine.compiled import CompiledGraph
from nodestep._engine.lease import StreamMark, stream_ended, stream_runs
from nodestep._engine.loop import execute
from nodestep._engine.request import RunRequest
from nodestep._engine.results import StreamEvent
from nodestep._engine.step_events import EventSink

__all__ = ["stream_run"]


class _Handoff(EventSink):
    """The run's side of the meeting point: the run goes on only when the caller asks."""

    def __init__(self) -> None:
        self.error: BaseException | None = None
        # The stream's weak reference, kept so that its callback (``leave``) fires.
        self.ref: weakref.ref[AsyncGenerator[StreamEvent, None]] | None = None
        self.mark = StreamMark()

    def open(self) -> tuple[MemoryObjectSendStream[None], MemoryObjectReceiveStream[StreamEvent]]:
        """Make the meeting point; return the caller's ends (asks out, events in).

        Made when the stream starts, not with the stream: a stream dropped before its first
        event never runs the code that closes them, and would warn of unclosed streams.
        """
        asks, self._asked = anyio.create_memory_object_stream[None](0)
        self._events, events = anyio.create_memory_object_stream[StreamEvent](0)
        return asks, events

    def leave(self, _: object = None) -> None:
        """Mark the run as left: its generator was dropped unclosed (``lease.stopping``).

        Called by the generator's weak reference as the generator goes, in the thread
        that dropped it; the event loop's finalizer then closes it.
        """
        self.mark.left = True

    async def send(self, event: StreamEvent) -> None:
        await self._events.send(event)
        await self._asked.receive()  # the caller handles the event; the run waits

    async def produce(self, graph: CompiledGraph, req: RunRequest) -> None:
        """Run the graph, then send its terminal event (or keep its error for the caller)."""
        store, thread_id = req.store, req.thread_id
        if store is not None and thread_id is not None:
            stream_runs(store, thread_id, req.branch_id, self.mark)
        try:
            await self._asked.receive()
            final = await execute(graph, req, self)
            await self._events.send(final)
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as error:  # raised to the caller by stream_run
            self.error = error
        finally:
            if store is not None and thread_id is not None:
                stream_ended(store, thread_id, req.branch_id, self.mark)
            self._events.close()
            self._asked.close()


def stream_run(graph: CompiledGraph, req: RunRequest) -> AsyncGenerator[StreamEvent, None]:
    """Run the graph for one call and yield its events; the last one is the terminal event.

    Closing the generator, or cancelling the caller while it waits for an event, stops the
    run, which records ``run_stopped`` (``"stream_closed"`` or ``"cancelled"``). A
    generator dropped unclosed is closed by the event loop's finalizer; meanwhile the
    caller's next call on its branch waits for its run to stop (``lease.stopping``).
    """
    handoff = _Handoff()
    stream = _stream(handoff, graph, req)
    handoff.ref = weakref.ref(stream, handoff.leave)
    return stream


async def _stream(
    handoff: _Handoff, graph: CompiledGraph, req: RunRequest
) -> AsyncGenerator[StreamEvent, None]:
    asks, events = handoff.open()
    run = RunTask(handoff.produce(graph, req))
    try:
        while True:
            try:
                await asks.send(None)
                event = await events.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                break
            yield event
        await run.wait()
    except BaseException as stop:
        handoff.stop_reason = "stream_closed" if isinstance(stop, GeneratorExit) else "cancelled"
        run.cancel()
        with anyio.CancelScope(shield=True):
            await run.wait()
        raise
    finally:
        asks.close()
        events.close()
    if handoff.error is not None:
        raise handoff.error
