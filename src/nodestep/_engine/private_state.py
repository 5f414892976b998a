"""Nodes' private state in a run: the copy a task gets, what it changed, and reading it back.

A node that declares ``@node(private_state=Model)`` gets, in every task, a fresh instance
of ``Model`` made from the thread's stored copy (``Position.node_states``), or the
model's defaults the first time. The task changes it in place; when the task finishes,
its JSON form is compared with the one the task started from, and a change travels with
the task's result into the history. A task that fails, pauses or is retried leaves the
stored copy as it was.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from nodestep._engine.compiled import CompiledGraph
from nodestep._engine.history_ops import position_at
from nodestep._errors import GraphConfigError, StateStoreError
from nodestep._flow.nodes import Node
from nodestep._state.model_form import model_json_form, stored_dump, validate_stored
from nodestep._superstep.position import Position
from nodestep.store import StateStore

__all__ = ["changed_private", "node_state", "read_private"]


def read_private(node: Node, pos: Position) -> tuple[BaseModel, dict[str, Any] | None]:
    """Return a fresh instance of ``node``'s private state and the JSON form it came from.

    Raises:
        StateStoreError: the stored copy does not fit the node's model any more.
    """
    model = node.private_state
    if model is None:  # pragma: no cover - only called for nodes that declare one
        raise TypeError(f"node '{node.name}' has no private state")
    stored = pos.node_states.get(node.name)
    try:
        return (model() if stored is None else validate_stored(model, stored)), stored
    except ValidationError as error:
        raise StateStoreError(
            f"The stored private state of node '{node.name}' does not fit its model "
            f"{model.__name__} ({error.error_count()} problems; first: "
            f"{error.errors()[0]['msg']} at {error.errors()[0]['loc']}). Give the model's "
            f"new fields defaults, or fork the thread at an event before the change."
        ) from None


def changed_private(
    node: Node, instance: BaseModel, before: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Return the JSON form of ``instance`` if the task changed it, else ``None``.

    Raises:
        StateStoreError: a value in it has no JSON form, or its JSON form reads back
            different (the task fails, nothing is kept).
    """
    model = node.private_state
    if not isinstance(instance, model or BaseModel):
        raise GraphConfigError(
            f"Node '{node.name}' replaced its private state parameter with "
            f"{type(instance).__name__}; change the {_name(model)} it got in place instead."
        )
    data = model_json_form(
        instance, f"The private state of node '{node.name}' ({type(instance).__name__})"
    )
    if before is None:
        before = stored_dump(type(instance)())
    return None if data == before else data


def _name(model: type[BaseModel] | None) -> str:
    return "model" if model is None else model.__name__


async def node_state(
    graph: CompiledGraph,
    store: StateStore,
    thread_id: str,
    name: str,
    branch_id: str | None,
    at: str | None,
) -> BaseModel:
    """Return node ``name``'s private state on a thread, at event ``at`` or the latest.

    Raises:
        GraphConfigError: the graph has no such node, or it declares no private state.
        UnknownThreadError: the thread, branch or event does not exist.
    """
    node = graph.nodes.get(name)
    if node is None or node.private_state is None:
        with_state = sorted(n for n, v in graph.nodes.items() if v.private_state is not None)
        what = "has no node" if node is None else "has a node, but no private state, for"
        raise GraphConfigError(
            f"Graph '{graph.name}' {what} {name!r}. Nodes with private state: "
            f"{', '.join(with_state) or 'none'}; declare it with @node(private_state=Model)."
        )
    pos, _ = await position_at(graph, store, thread_id, branch_id, at)
    return read_private(node, pos)[0]
