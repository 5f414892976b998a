"""Everything one call of a graph needs while it runs: ids, options, routes and events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from nodestep._engine.compiled import CompiledGraph
from nodestep._engine.inbox import Inbox
from nodestep._engine.observe import RunWatch
from nodestep._engine.redact import stored_error, stored_text
from nodestep._engine.request import RunRequest
from nodestep._engine.results import StreamEvent
from nodestep._engine.routing import Router
from nodestep._engine.step_events import EventSink
from nodestep._engine.writer import HistoryWriter
from nodestep._errors import GraphExecutionError
from nodestep._flow.credentials import Credentials
from nodestep._superstep.position import PlannedTask, Position

__all__ = ["EMIT_MODES", "IN_STEP_MODES", "Runtime"]

IN_STEP_MODES = frozenset({"custom", "debug", "messages"})
"""Stream modes with events from inside a superstep, while its nodes run."""

EMIT_MODES = ("custom", "messages")
"""The modes a node may send events in with ``ctx.emit(data, mode=...)``."""


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
        request: The call's options.
        sink: Where the run's stream events go; a subgraph run's go there too.
        path: The parent task ids above this run when it runs as a subgraph; ``()`` for
            the run of the graph the caller called.
        inbox: Where the tasks of a superstep with several tasks report back.
        watch: The run's log records and spans, or ``None`` when both are off.
        agents: Spawns its nodes' sub-agents (``_engine.subagents.SubAgents``, set by
            the code that runs the loop), or ``None``.
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
        self.nodes = graph.nodes if graph.run_nodes is None else graph.run_nodes
        self.run_id = run_id
        self.thread_id = thread_id
        self.branch_id = req.branch_id
        self.context = req.context
        self.credentials = req.credentials
        # Credentials resolved in this call, by role: shared by its tasks, and masked in
        # the failure messages it stores.
        self.resolved: dict[str, Credentials] = {}
        self.modes = req.modes
        # Whether a node's ``ctx.emit`` reaches the stream: asked per task (``emitter``).
        self.emits = "custom" in req.modes or "messages" in req.modes
        self.request = req
        self.writer = writer
        # The parent task ids above this run when it runs as a subgraph; () at the top.
        self.path: tuple[str, ...] = ()
        self.pos = pos
        self.can_pause = writer is not None
        self.stores_json = writer is not None
        self.in_step_events = bool(req.modes & IN_STEP_MODES)
        self.sink = EventSink()  # the run loop's, once it runs
        if graph.nested and writer is not None and writer.gate is None:
            # Subgraph tasks commit while this loop does. (A ``ChildWriter`` takes its top
            # writer's gate; its own only tells the loop to record task ends under it.)
            writer.gate = anyio.Lock()
        self.router = Router(
            graph.flow,
            graph.schema,
            stores_json=writer is not None,
            cache=graph.run_tables,
            context=req.context,
        )
        self.inbox = Inbox()
        self.watch: RunWatch | None = None
        self.agents: Any = None

    def missing_node_error(self, name: str) -> GraphExecutionError:
        """Return the error for a pending superstep that names a node the graph lacks."""
        return GraphExecutionError(
            f"Thread '{self.thread_id}' waits on node '{name}', which graph "
            f"'{self.graph.name}' does not have. A node's name is its stored identity: "
            f"restore the node under that name to continue the thread, or fork it at an "
            f"earlier event."
        )

    def stored_error(self, error: BaseException) -> tuple[str, str]:
        """Return the type name and message to store for ``error``, secrets masked.

        The call's context and the credentials its nodes were given are masked, then the
        graph's ``redact=`` runs (see ``_engine.redact``); ``error`` is left as it is.
        """
        secrets = [c.secret() for c in self.resolved.values()]
        return stored_error(error, self.context, self.graph.redact, secrets)

    def stored_text(self, text: str) -> str:
        """Return ``text``, a failure's message the run stores as data (a tool node's
        error tool message), cleaned as ``stored_error`` cleans a failure's message."""
        secrets = [c.secret() for c in self.resolved.values()]
        return stored_text(text, self.context, self.graph.redact, secrets)

    def emitter(self, node: str, task_id: str, step: int) -> Callable[[Any, str], None] | None:
        """Return what ``ctx.emit`` calls for a task, or ``None`` when nobody streams it."""
        modes = self.modes
        if not self.emits:
            return None
        inbox, run_id = self.inbox, self.run_id
        generation = inbox.generation

        def emit(data: Any, mode: str) -> None:
            if mode in modes and mode in EMIT_MODES:
                event = StreamEvent(mode, data, node, step, task_id, run_id)
                inbox.post(generation, "event", event)

        return emit

    def debug_input(self, task: PlannedTask, step: int, view: Any) -> None:
        """Report what a task reads, for the ``debug`` stream mode."""
        if "debug" in self.modes:
            data = {"type": "node_input", "state": view.model_dump()}
            event = StreamEvent("debug", data, task.node, step, task.task_id, self.run_id)
            self.inbox.post(self.inbox.generation, "event", event)
