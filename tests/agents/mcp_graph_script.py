"""nodestep graphs served as MCP tools, for the tests that drive them with the mcp SDK.

``python mcp_graph_script.py GRAPH stdio`` serves over stdin/stdout;
``python mcp_graph_script.py GRAPH http PORT`` serves streamable HTTP on 127.0.0.1:PORT.
GRAPH is ``pricing`` (a plain graph; a refund above 100 pauses for approval; threads by
argument) or ``chat`` (a ReAct agent on a scripted model that calls a tool; a thread per
call).
"""

from __future__ import annotations

import sys

from pydantic import Field

from nodestep import END, START, BaseState, Graph, interrupt, node
from nodestep.agents import (
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    create_react_agent,
    serve_mcp,
    tool,
)


class Order(BaseState):
    """Price an order; a refund above 100 waits for a manager's approval."""

    items: list[str] = Field(default_factory=list)
    refund: int = 0
    total: int = 0
    approved: bool | None = None


@node
def price(state: Order) -> dict:
    return {"total": 3 * len(state.items)}


@node
def approve(state: Order) -> dict:
    if state.refund <= 100:
        return {"approved": True}
    answer = interrupt({"question": f"refund {state.refund}?"}, id="manager")
    return {"approved": answer == "yes"}


def pricing() -> Graph[Order]:
    graph = Graph(Order, name="pricing")
    return graph.flow(START >> price, price >> approve, approve >> END)


@tool
def weather(city: str) -> str:
    """Tell the weather of a city."""
    return f"sunny in {city}"


def chat() -> Graph:
    replies = [
        ScriptedReply(tool_calls=[ToolCall(id="w1", name="weather", args={"city": "Oslo"})]),
        ScriptedReply(content="It is sunny in Oslo."),
    ]
    # The scripted model answers each call the same way, so each run gets the script anew.
    model = ScriptedModel(replies * 50)
    return create_react_agent(model, [weather], name="helper")


def main(argv: list[str]) -> None:
    which, transport = argv[0], argv[1]
    graph = pricing() if which == "pricing" else chat()
    threads = "argument" if which == "pricing" else "per_call"
    if transport == "http":
        serve_mcp(graph, transport="http", port=int(argv[2]), threads=threads)
    else:
        serve_mcp(graph, threads=threads)


if __name__ == "__main__":
    main(sys.argv[1:])
