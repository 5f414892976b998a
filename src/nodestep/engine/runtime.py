"""Everything one call of a graph needs while it runs: ids, options, routing and events."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nodestep.engine.results import StreamEvent
from nodestep.errors import GraphExecutionError, StateUpdateError
from nodestep.graph.flow import END, Branch, Send, Terminal, When
from nodestep.graph.nodes import Node
from nodestep.state.json import to_json_value
from nodestep.state.schema import StateSchema
from nodestep.superstep.position import PlannedTask, Position, Route, SendRoute

if TYPE_CHECKING:
    from nodestep.engine.writer import HistoryWriter
    from nodestep.graph.graph import Graph

__all__ = ["Runtime"]


class Runtime:
    """The state of one call: the thread's position, where events go, how routes resolve."""

    def __init__(
        self,
        graph: Graph[Any],
        *,
        run_id: str,
        thread_id: str,
        branch_id: str,
        context: Any,
        modes: frozenset[str],
        writer: HistoryWriter | None,
        pos: Position,
    ) -> None:
        self.graph = graph
        self.schema: StateSchema = graph.schema
        self.nodes: dict[str, Node] = graph.nodes
        self.graph_name = graph.name
        self.run_id = run_id
        self.thread_id = thread_id
        self.branch_id = branch_id
        self.context = context
        self.modes = modes
        self.writer = writer
        self.pos = pos
        self.can_pause = writer is not None
        self.stores_json = writer is not None
        self.in_step_events = bool(modes & {"custom", "debug"})
        self.wake: asyncio.Event | None = None
        self.generation = 0
        self._inbox: deque[tuple[str, Any]] = deque()
        self._lock = threading.Lock()
        self._wake_pending = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0

    # -- the pending superstep, as tasks see it ------------------------------------------

    @property
    def values(self) -> dict[str, Any]:
        return self.pos.values

    @property
    def answers(self) -> dict[str, Any]:
        return self.pos.answers

    @property
    def caches(self) -> dict[str, dict[str, Any]]:
        return self.pos.caches

    # -- the inbox: task completions and in-step events -------------------------------------

    def open_inbox(self) -> int:
        """Start collecting completions and events for a new superstep; return its number.

        Worker threads post into a deque and wake the loop at most once per drain, so fifty
        thread tasks cost one loop wake-up instead of fifty.
        """
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.wake = asyncio.Event()
        self._wake_pending = False
        self.generation += 1
        self._inbox.clear()
        return self.generation

    def close_inbox(self) -> None:
        """Stop collecting: posts of tasks still running (e.g. after a timeout) are dropped."""
        self.generation += 1
        self.wake = None
        self._inbox.clear()

    def post(self, generation: int, kind: str, payload: Any) -> None:
        """Deliver ``(kind, payload)`` to the loop; safe to call from a worker thread."""
        wake = self.wake
        if generation != self.generation or wake is None or self._loop is None:
            return
        self._inbox.append((kind, payload))
        if threading.get_ident() == self._loop_thread:
            wake.set()
            return
        with self._lock:
            if self._wake_pending:
                return
            self._wake_pending = True
        with contextlib.suppress(RuntimeError):  # a closed loop: the run is over
            self._loop.call_soon_threadsafe(self._set_wake, wake)

    def _set_wake(self, wake: asyncio.Event) -> None:
        with self._lock:
            self._wake_pending = False
        wake.set()

    def take(self) -> list[tuple[str, Any]]:
        """Return everything posted since the last call, in order."""
        inbox = self._inbox
        items = []
        while inbox:
            items.append(inbox.popleft())
        return items

    def push(self, event: StreamEvent) -> None:
        """Deliver an in-step stream event (``custom``, ``debug``)."""
        self.post(self.generation, "event", event)

    def emitter(self, node: str, task_id: str, step: int) -> Callable[[Any], None] | None:
        if "custom" not in self.modes:
            return None
        run_id = self.run_id

        def emit(data: Any) -> None:
            self.push(StreamEvent("custom", data, node, step, task_id, run_id))

        return emit

    def debug_input(self, task: PlannedTask, step: int, view: Any) -> None:
        if "debug" in self.modes:
            data = {"type": "node_input", "state": view.model_dump()}
            self.push(StreamEvent("debug", data, task.node, step, task.task_id, self.run_id))

    # -- routes ---------------------------------------------------------------------------

    def missing_node_error(self, name: str) -> GraphExecutionError:
        return GraphExecutionError(
            f"Thread '{self.thread_id}' waits on node '{name}', which graph '{self.graph_name}' "
            f"does not have. A node's name is its stored identity: restore the node under that "
            f"name to continue the thread, or fork it at an earlier event."
        )

    def goto_routes(self, node: Node, goto: list[Any]) -> list[Route]:
        """Resolve a node's ``Command(goto=...)``/``Send`` targets; each must be declared."""
        declared = self.graph.declared[node.name]
        routes: list[Route] = []
        for target in goto:
            if isinstance(target, Send):
                name = target.node_name
                self._check_declared(node, name, declared)
                routes.append(self.send_route(node.name, name, target.payload))
                continue
            if target is END:
                self._check_declared(node, "END", declared)
                continue
            if isinstance(target, Node):
                name = target.name
            elif isinstance(target, str):
                name = target
            else:
                raise GraphExecutionError(
                    f"Node '{node.name}' routed to {target!r}; a goto target is a node, a node "
                    f"name, END or Send(node, payload)."
                )
            self._check_declared(node, name, declared)
            routes.append(name)
        return routes

    def _check_declared(self, node: Node, name: str, declared: frozenset[str]) -> None:
        if name not in declared:
            shown = ", ".join(sorted(declared)) or "nothing"
            raise GraphExecutionError(
                f"Node '{node.name}' routed to '{name}', which is not declared in its "
                f"@node(goto=[...]) (declared: {shown}). Add it to goto= so the flow can be "
                f"checked and drawn."
            )

    def send_route(self, writer: str, target: str, payload: dict[str, Any]) -> SendRoute:
        fields = self.schema.fields
        typed: dict[str, Any] = {}
        for key, value in payload.items():
            spec = fields.get(key)
            if spec is None:
                raise StateUpdateError(
                    f"Node '{writer}' sent a payload to '{target}' with '{key}', which is not a "
                    f"field of {self.schema.cls.__name__}; payload keys must be state fields.",
                    field=key,
                    writer=writer,
                )
            typed[key] = spec.validate(value, writer)
        as_json = None
        if self.stores_json:
            as_json = {k: fields[k].to_json(v) for k, v in typed.items()}
        return SendRoute(target, typed, as_json)

    def edge_routes(self, node: str, state: Any) -> list[Route]:
        """Resolve the edge, ``when`` or ``branch`` after ``node`` on the merged ``state``."""
        edge = self.graph.edges.get(node)
        if edge is None or edge is END:
            return []
        if isinstance(edge, str):
            return [edge]
        if isinstance(edge, When):
            verdict = edge.predicate(state)
            if not isinstance(verdict, bool):
                raise GraphExecutionError(
                    f"The when() predicate after '{node}' returned {verdict!r}; it must return "
                    f"True or False."
                )
            return _target_routes(edge.target if verdict else edge.otherwise)
        if isinstance(edge, Branch):
            key = edge.router(state)
            try:
                target = edge.mapping[key]
            except (KeyError, TypeError):
                keys = ", ".join(repr(k) for k in edge.mapping)
                raise GraphExecutionError(
                    f"The branch() router after '{node}' returned {key!r}, which is not a key of "
                    f"its mapping ({keys}). Return one of those keys, or add {key!r} to the "
                    f"mapping."
                ) from None
            return _target_routes(target)
        raise GraphExecutionError(f"Unknown route after '{node}': {edge!r}")

    def cache_json(self, task_id: str, cache: dict[str, Any]) -> dict[str, Any]:
        return dict(to_json_value(cache, what=f"ctx.cache of task '{task_id}'"))


def _target_routes(target: Node | Terminal) -> list[Route]:
    if isinstance(target, Node):
        return [target.name]
    return []
