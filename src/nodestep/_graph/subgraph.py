"""``subgraph()``: a graph as a node of another graph, and a ``Graph`` used directly in a flow.

The graph layer hands the engine the child's compiled graph (``engine.subgraph``); the
engine never sees the public ``Graph``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from nodestep._engine.compiled import CompiledGraph
from nodestep._engine.request import RunRequest
from nodestep._engine.subgraph import SubgraphNode
from nodestep._engine.subgraph_map import StateMap
from nodestep._errors import GraphConfigError
from nodestep._flow.edges import Chain, Edge
from nodestep._flow.validation import Flow
from nodestep._state.schema import StateSchema
from nodestep.store import StateStore

__all__ = ["nested_edges", "subgraph", "subgraph_wiring", "with_subgraphs"]


class _Child(Protocol):
    """What ``subgraph()`` reads of a ``Graph`` (graph.graph imports this module)."""

    @property
    def name(self) -> str: ...

    @property
    def state_store(self) -> StateStore | None: ...

    def _engine_graph(self) -> CompiledGraph: ...


def subgraph(
    name: str,
    graph: _Child,
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
    if not callable(getattr(graph, "_engine_graph", None)):
        raise TypeError(f"subgraph(name, graph) takes a Graph, got {type(graph).__name__}.")
    compiled = graph._engine_graph()
    if graph.state_store is not None:
        raise GraphConfigError(
            f"Graph '{graph.name}' has its own state store, but a subgraph runs on the "
            f"parent's store and thread. Build it without state_store= to use it as a node."
        )
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


def nested_edges(edges: Iterable[Any], graph_type: type[Any]) -> list[Any]:
    """Return ``edges`` with each ``Graph`` in an edge replaced by its subgraph node.

    Graphs in a list end, a join or a chain are replaced too.

    A graph used directly is the node ``subgraph(graph.name, graph)``; the same graph
    object gives the same node in every edge.
    """
    made: dict[int, SubgraphNode] = {}

    def as_node(x: Any) -> Any:
        if not isinstance(x, graph_type):
            return x
        if id(x) not in made:
            made[id(x)] = subgraph(x.name, x)
        return made[id(x)]

    def end(x: Any) -> Any:
        # A list end (``a >> [child, b]``, the join ``[child, b] >> c``) holds nodes too.
        return tuple(as_node(n) for n in x) if isinstance(x, tuple) else as_node(x)

    def swap(e: Any) -> Any:
        if isinstance(e, Edge):
            return Edge(end(e.source), end(e.target))
        if isinstance(e, Chain):  # ``a >> child >> b``: each edge of the chain
            return Chain(tuple(swap(link) for link in e.edges))
        return as_node(e)

    return [swap(e) for e in edges]


def subgraph_wiring(flow: Flow, schema: StateSchema) -> bool:
    """Check the flow's subgraph nodes against the parent's state; tell whether it has any.

    Raises:
        GraphConfigError: a subgraph's state mapping cannot work, listing every problem.
    """
    nodes = [n for n in flow.nodes.values() if isinstance(n, SubgraphNode)]
    problems = [p for n in nodes for p in n.state_map.problems(n.name, schema, n.child.schema)]
    if problems:
        raise GraphConfigError("\n".join(problems) + ".", problems)
    return bool(nodes)


def with_subgraphs(req: RunRequest, subgraphs: Any) -> RunRequest:
    """Return the stream's request, with the events of subgraph runs when asked for.

    Raises:
        TypeError: ``subgraphs`` is not a bool.
    """
    if not isinstance(subgraphs, bool):
        raise TypeError(f"stream(subgraphs=...) takes True or False, got {subgraphs!r}.")
    return replace(req, subgraphs=True) if subgraphs else req
