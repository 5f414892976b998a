"""``subgraph()``: a graph as a node of another graph.

The child runs as one task of its parent; the engine gets the child's compiled graph
(``_graph.graph.child_graph``), never the public ``Graph``. A ``Graph`` used directly in a flow
(``START >> child``) is the node ``subgraph(child.name, child)`` (see ``Graph.flow``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nodestep._engine.subgraph import SubgraphNode
from nodestep._engine.subgraph_map import StateMap
from nodestep._graph.graph import Graph, child_graph

__all__ = ["subgraph"]


def subgraph(
    name: str,
    graph: Graph[Any],
    *,
    share: Sequence[str] | None = None,
    state_in: Callable[[Any], Mapping[str, Any]] | None = None,
    state_out: Callable[[Any], Mapping[str, Any]] | None = None,
    goto: Sequence[Any] | None = None,
    defer: bool = False,
) -> SubgraphNode:
    """Make ``graph`` a node named ``name`` of another graph.

    The child runs inside the parent's superstep, as one task, on the parent's state
    store and thread: its history is stored in the parent's thread, under the task, so
    interrupts, continuations, ``load(at=)``, ``fork`` and ``history`` reach into it.

    Which state flows (see the Subgraphs docs page):

    * In: ``state_in(parent_state)``, else the shared fields' values, as the child's
      input; the child starts from its defaults each time the node runs.
    * Out: ``state_out(child_final_state)`` as the node's update, else the shared fields
      the child changed.
    * With no ``share=``, every field is shared, which needs one state class for both.

    Args:
        name: The node's name; it names the child's history and its interrupt keys.
        graph: The child graph, with its flow declared and no state store of its own.
        share: Fields both state classes declare, passed in and back.
        state_in: Builds the child's input (a dict) from the parent's state.
        state_out: Builds the node's update (a dict) from the child's final state.
        goto: The parent's nodes (or ``END``) a child node may route to with
            ``Command(graph=PARENT, goto=...)``.
        defer: Hold the node's task until nothing else is left to run in the turn, as
            ``@node(defer=True)`` does.

    Returns:
        The node, for the parent's ``flow()``.

    Raises:
        TypeError: ``graph`` is not a ``Graph``, a mapping function is not callable,
            ``share`` is not a list of field names, or ``defer`` is not a bool.
        GraphConfigError: the child has no flow yet, or has its own state store.
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"subgraph(name, graph) takes a Graph, got {type(graph).__name__}.")
    compiled = child_graph(graph)
    for what, fn in (("state_in", state_in), ("state_out", state_out)):
        if fn is not None and not callable(fn):
            raise TypeError(f"subgraph({what}=...) takes a function, got {fn!r}.")
    shared = _shared(share)
    return SubgraphNode(name, compiled, StateMap(shared, state_in, state_out), goto, defer)


def _shared(share: Sequence[str] | None) -> tuple[str, ...] | None:
    if share is not None and (
        isinstance(share, str) or not all(isinstance(f, str) for f in share) or not share
    ):
        raise TypeError(
            f"subgraph(share=...) takes a non-empty list of field names, got {share!r}; "
            f"e.g. share=['messages']."
        )
    return None if share is None else tuple(share)
