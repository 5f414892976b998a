"""Everything one call of a graph needs while it runs: ids, options, routes and events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nodestep.engine.compiled import CompiledGraph
from nodestep.engine.inbox import Inbox
from nodestep.engine.request import RunRequest
from nodestep.engine.results import StreamEvent
from nodestep.engine.routing import Router, missing_node_error
from nodestep.engine.writer import HistoryWriter
from nodestep.errors import GraphExecutionError
from nodestep.state.json import to_json_value
from nodestep.superstep.position import PlannedTask, Position

__all__ = ["IN_STEP_MODES", "Runtime"]

IN_STEP_MODES = frozenset({"custom", "debug"})
"""Stream modes with events from inside a superstep, while its nodes run."""


class Runtime:
    """The state of one call: the graph, the thread's position, where records and events go.

    Attributes:
        graph: The compiled graph.
        pos: The thread's position; it moves only by the records the run applies.
        writer: Appends the run's records, or ``None`` without a store.
        can_pause: Whether ``interrupt()`` may pause (only with a store).
        stores_json: Whether updates need their JSON form (only with a store).
        in_step_events: Whether the stream wants events while nodes run.
        router: Resolves the routes of finished tasks.
        inbox: Where the tasks of a superstep with several tasks report back.
    """

    def __init__(
        self,
        graph: CompiledGraph,
        req: RunRequest,
        *,
        run_id: str,
        thread_id: str,
        writer: HistoryWriter | None,
        pos: Position,
    ) -> None:
        self.graph = graph
        self.schema = graph.schema
        self.nodes = graph.nodes
        self.run_id = run_id
        self.thread_id = thread_id
        self.branch_id = req.branch_id
        self.context = req.context
        self.modes = req.modes
        self.writer = writer
        self.pos = pos
        self.can_pause = writer is not None
        self.stores_json = writer is not None
        self.in_step_events = bool(req.modes & IN_STEP_MODES)
        self.router = Router(
            graph.flow, graph.schema, stores_json=writer is not None, context=req.context
        )
        self.inbox = Inbox()

    def missing_node_error(self, name: str) -> GraphExecutionError:
        return missing_node_error(self.thread_id, self.graph.name, name)

    def emitter(self, node: str, task_id: str, step: int) -> Callable[[Any], None] | None:
        """Return what ``ctx.emit`` calls for a task, or ``None`` when nobody streams it."""
        if "custom" not in self.modes:
            return None
        inbox, run_id = self.inbox, self.run_id
        generation = inbox.generation

        def emit(data: Any) -> None:
            event = StreamEvent("custom", data, node, step, task_id, run_id)
            inbox.post(generation, "event", event)

        return emit

    def debug_input(self, task: PlannedTask, step: int, view: Any) -> None:
        """Report what a task reads, for the ``debug`` stream mode."""
        if "debug" in self.modes:
            data = {"type": "node_input", "state": view.model_dump()}
            event = StreamEvent("debug", data, task.node, step, task.task_id, self.run_id)
            self.inbox.post(self.inbox.generation, "event", event)

    def cache_json(self, task_id: str, cache: dict[str, Any]) -> dict[str, Any]:
        """Return a paused task's ``ctx.cache`` as JSON data (it is stored with the pause)."""
        return dict(to_json_value(cache, what=f"ctx.cache of task '{task_id}'"))
