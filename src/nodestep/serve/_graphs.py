"""The served graphs, by name: a dict or a list of graphs (or of agents) made one table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nodestep import Graph, GraphConfigError

__all__ = ["graph_table"]


def _graph(name: str, value: Any) -> Graph[Any]:
    graph = getattr(value, "graph", value) if not isinstance(value, Graph) else value
    if not isinstance(graph, Graph):
        raise GraphConfigError(
            f"Served graph {name!r} is a {type(value).__name__}, not a Graph; pass Graph "
            f"objects (an Agent is served as its .graph)."
        )
    return graph


def graph_table(graphs: dict[str, Any] | Sequence[Any]) -> dict[str, Graph[Any]]:
    """Return the graphs by name.

    Raises:
        GraphConfigError: an entry is no graph, two graphs of a list share a name, or
            there is no graph at all.
    """
    if isinstance(graphs, dict):
        table = {str(name): _graph(str(name), value) for name, value in graphs.items()}
    else:
        table = {}
        for value in graphs:
            graph = _graph(repr(value), value)
            if graph.name in table:
                raise GraphConfigError(
                    f"Two served graphs are named {graph.name!r}; give each its own "
                    f"Graph(name=...), or pass a dict of name -> graph."
                )
            table[graph.name] = graph
    if not table:
        raise GraphConfigError("create_app needs at least one graph to serve.")
    return table
