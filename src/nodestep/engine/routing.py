"""Resolve routes at run time: a node's own ``Command``/``Send`` targets, and its edges."""

from __future__ import annotations

from typing import Any

from nodestep.errors import GraphExecutionError, StateUpdateError
from nodestep.flow.edges import END, Terminal
from nodestep.flow.nodes import Node
from nodestep.flow.routing import Branch, Send, When
from nodestep.flow.validation import Flow
from nodestep.state.schema import StateSchema
from nodestep.superstep.position import Route, SendRoute

__all__ = ["Router", "missing_node_error"]


def missing_node_error(thread_id: str, graph_name: str, name: str) -> GraphExecutionError:
    """Return the error for a thread whose pending superstep names a node the graph lacks."""
    return GraphExecutionError(
        f"Thread '{thread_id}' waits on node '{name}', which graph '{graph_name}' does not "
        f"have. A node's name is its stored identity: restore the node under that name to "
        f"continue the thread, or fork it at an earlier event."
    )


class Router:
    """Turns the targets a node chose, and the edges after it, into routes.

    Args:
        flow: The graph's routing tables.
        schema: The state schema, to check ``Send`` payloads.
        stores_json: Whether the run has a store; then payloads get their JSON form now,
            so a value without one fails the task that sent it.
    """

    def __init__(self, flow: Flow, schema: StateSchema, *, stores_json: bool) -> None:
        self.flow = flow
        self.schema = schema
        self.stores_json = stores_json

    def goto_routes(self, node: Node, goto: list[Any]) -> list[Route]:
        """Resolve a node's ``Command(goto=...)``/``Send`` targets; each must be declared."""
        declared = self.flow.declared[node.name]
        routes: list[Route] = []
        for target in goto:
            if isinstance(target, Send):
                name = target.node_name
                _check_declared(node, name, declared)
                routes.append(self.send_route(node.name, name, target.payload))
                continue
            if target is END:
                _check_declared(node, "END", declared)
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
            _check_declared(node, name, declared)
            routes.append(name)
        return routes

    def send_route(self, writer: str, target: str, payload: dict[str, Any]) -> SendRoute:
        """Return the route of a ``Send`` from ``writer``, its payload checked."""
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
        edge = self.flow.edges.get(node)
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


def _check_declared(node: Node, name: str, declared: frozenset[str]) -> None:
    if name not in declared:
        shown = ", ".join(sorted(declared)) or "nothing"
        raise GraphExecutionError(
            f"Node '{node.name}' routed to '{name}', which is not declared in its "
            f"@node(goto=[...]) (declared: {shown}). Add it to goto= so the flow can be "
            f"checked and drawn."
        )


def _target_routes(target: Node | Terminal) -> list[Route]:
    if isinstance(target, Node):
        return [target.name]
    return []
