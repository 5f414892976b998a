"""The nodestep way, for LangGraph idioms tried on a ``Graph``.

People who know LangGraph try ``graph.add_node(...)``, ``graph.compile()`` or
``invoke(x, config={"configurable": {"thread_id": ...}})`` first. Each gets the error it
would get anyway, of the same builtin kind (an ``AttributeError`` stays one, so
``hasattr`` and ``getattr(graph, name, default)`` still work), with one line more: how
nodestep says it. The lookups run only after Python's own lookup has failed, so a run
never pays for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["config_keyword_error", "missing_graph_attribute"]

# What a LangGraph ``StateGraph`` method is, on a nodestep ``Graph``.
_GRAPH_WAYS = {
    "add_node": (
        "a node is a function decorated with @node, and the graph takes its nodes from "
        "the flow: Graph(State).flow(START >> my_node, my_node >> END)"
    ),
    "add_edge": "declare every edge in one flow() call: graph.flow(START >> a, a >> b, b >> END)",
    "add_conditional_edges": (
        "route in the flow with when() or branch(): "
        "graph.flow(START >> a, a >> branch(router, {'x': b, 'y': END}))"
    ),
    "add_sequence": "chain the nodes in the flow: graph.flow(START >> a >> b >> END)",
    "set_entry_point": "the flow's first edge starts it: graph.flow(START >> first, ...)",
    "set_conditional_entry_point": (
        "the flow starts at one node, which routes: "
        "graph.flow(START >> first, first >> branch(router, {...}), ...)"
    ),
    "set_finish_point": "the flow ends it: graph.flow(..., last >> END)",
    "compile": (
        "a graph runs once flow() has declared its edges, graph = Graph(State).flow(...); "
        "graph.invoke(...), and a checkpointer is Graph(State, state_store=...)"
    ),
    "get_graph": "draw it with graph.to_mermaid()",
    "astream_events": (
        "a run's events are StreamEvents: async for event in graph.astream(input, "
        "stream_mode=['updates', 'messages', 'custom'])"
    ),
}


def missing_graph_attribute(graph: object, name: str) -> AttributeError:
    """The error for an attribute a ``Graph`` does not have, with the nodestep way if known.

    Args:
        graph: The graph that was asked.
        name: The attribute asked for.

    Returns:
        An ``AttributeError`` carrying ``name`` and ``obj``, so Python's own "Did you
        mean" suggestion still works for a typo.
    """
    message = f"{type(graph).__name__!r} object has no attribute {name!r}"
    way = _GRAPH_WAYS.get(name)
    if way is not None:
        message += f"; in nodestep, {way}"
    return AttributeError(message, name=name, obj=graph)


def config_keyword_error(method: str, config: Any) -> TypeError | None:
    """The error for ``config=`` (LangGraph's run config) given to a run method.

    The message spells out the keywords that say the same thing, from the config given:
    ``configurable``'s ``thread_id`` becomes ``thread_id=``, its other keys the run's
    ``context=``, and a ``recursion_limit`` of n the call's ``max_steps=`` n - 1.

    Args:
        method: The method called (``"invoke"``, ``"stream"``, ...).
        config: The value given as ``config``.

    Returns:
        The ``TypeError``, or ``None`` when ``config`` is not a dict (the caller's own
        message for an unknown keyword fits best).
    """
    if not isinstance(config, Mapping):
        return None
    configurable = config.get("configurable")
    values = dict(configurable) if isinstance(configurable, Mapping) else {}
    keywords = ["input"]
    if "thread_id" in values:
        keywords.append(f"thread_id={values.pop('thread_id')!r}")
    if values:
        keywords.append(f"context={values!r}")
    if len(keywords) == 1:
        keywords.append("thread_id=...")
    limit = config.get("recursion_limit")
    if type(limit) is int and limit > 1:  # LangGraph counts one superstep more
        keywords.append(f"max_steps={limit - 1}")
    way = f"{method}({', '.join(keywords)})"
    return TypeError(
        f"{method}() got an unexpected keyword argument 'config': nodestep takes run options "
        f"as keywords, not LangGraph's config dict; here: {way}."
    )
