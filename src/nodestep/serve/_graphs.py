"""The served graphs, by name: a dict or a list of graphs (or of agents) made one table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nodestep import Agent, Graph, GraphConfigError
from nodestep.serve._bodies import ApiError
from nodestep.serve._shapes import text_content

__all__ = ["agent_input", "agent_table", "graph_table"]


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


def agent_table(graphs: dict[str, Any] | Sequence[Any]) -> dict[str, Agent]:
    """Return the ``Agent``s among the served values, by their served name."""
    if isinstance(graphs, dict):
        return {str(name): value for name, value in graphs.items() if isinstance(value, Agent)}
    return {value.graph.name: value for value in graphs if isinstance(value, Agent)}


def agent_input(agent: Agent, values: dict[str, Any]) -> dict[str, Any]:
    """Return a chat client's ``{"messages": [...]}`` as the input of the agent's step.

    A client sends the user's new message (LangChain's ``{"type": "human", "content"}``,
    or ``{"role": "user", "content"}``); several are sent as one text, a paragraph each.
    Other input (the step's own shape, as ``Agent.step_input`` makes it) passes as it is.

    Raises:
        ApiError: 422: ``messages`` holds no user message, or one of another kind (the
            agent's replies and tool results are its own to make).
    """
    if set(values) != {"messages"}:
        return values
    messages = values["messages"]
    messages = messages if isinstance(messages, list) else [messages]
    texts = []
    for message in messages:
        kind = message.get("type", message.get("role")) if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if kind not in ("human", "user") or not isinstance(content, str | list):
            raise ApiError(
                422,
                f"A served Agent takes the user's messages as input ({{'type': 'human', "
                f"'content': ...}}); got {_shown(message)}. Its replies and tool results "
                f"are its own to make.",
            )
        texts.append(_text(content))
    if not texts:
        raise ApiError(422, "A served Agent's input has no message: send the user's message.")
    return agent.step_input("\n\n".join(texts))


def _text(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    blocks = [b if isinstance(b, dict) else {"type": "text", "text": str(b)} for b in content]
    return str(text_content(blocks))  # refuses a block that is not text


def _shown(message: Any) -> str:
    if isinstance(message, dict):
        return f"a message of type {message.get('type', message.get('role'))!r}"
    return f"a {type(message).__name__}"
