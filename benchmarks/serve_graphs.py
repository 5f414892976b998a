"""The graphs of ``benchmarks/serve.py``, for nodestep and for LangGraph's ``langgraph dev``.

``three``: three nodes in a row, each adding one to a counter (the ``runs.wait`` overhead);
``hold``: one node that sleeps ``seconds`` (streams held open by many clients at once).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from nodestep import END, START, BaseState, Graph, node


class Count(BaseState):
    n: int = 0


@node
def a(state: Count) -> dict[str, Any]:
    return {"n": state.n + 1}


@node
def b(state: Count) -> dict[str, Any]:
    return {"n": state.n + 1}


@node
def c(state: Count) -> dict[str, Any]:
    return {"n": state.n + 1}


three = Graph(Count, name="three").flow(START >> a, a >> b, b >> c, c >> END)


class Hold(BaseState):
    seconds: float = 0.0
    done: bool = False


@node
async def wait(state: Hold) -> dict[str, Any]:
    await asyncio.sleep(state.seconds)
    return {"done": True}


hold = Graph(Hold, name="hold").flow(START >> wait, wait >> END)

LANGGRAPH_SOURCE = """
import asyncio
from typing import TypedDict
from langgraph.graph import END, START, StateGraph

class Count(TypedDict, total=False):
    n: int

def a(state): return {"n": state.get("n", 0) + 1}
def b(state): return {"n": state["n"] + 1}
def c(state): return {"n": state["n"] + 1}

g = StateGraph(Count)
for f in (a, b, c): g.add_node(f.__name__, f)
g.add_edge(START, "a"); g.add_edge("a", "b"); g.add_edge("b", "c"); g.add_edge("c", END)
three = g.compile()

class Hold(TypedDict, total=False):
    seconds: float
    done: bool

async def wait(state):
    await asyncio.sleep(state.get("seconds", 0.0))
    return {"done": True}

h = StateGraph(Hold); h.add_node("wait", wait); h.add_edge(START, "wait"); h.add_edge("wait", END)
hold = h.compile()
"""

if __name__ == "__main__":  # python serve_graphs.py PORT STORE: serve both graphs
    from nodestep.serve import serve

    serve({"three": three, "hold": hold}, store=sys.argv[2], port=int(sys.argv[1]))
