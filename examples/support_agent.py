"""A support agent whose order lookup survives a flaky API, and whose chat remembers you.

Run it with ``python examples/support_agent.py``.

``lookup_order`` calls an orders API that drops the first two connections. Its
``RetryPolicy`` runs it again after a short wait, and each failed attempt is recorded in
the thread's history; a ``CircuitBreaker`` would stop calling the API if it kept failing.
The API needs a token: the node declares the role ``orders``, and the caller passes a
``CredentialsProvider`` with each call, so the token is never stored.

``assistant`` keeps the conversation in its private state (``ChatMemory``): not part of
the graph's state, but stored with the thread, so the second turn (a new graph on the
same file, as after a restart) still knows the customer's name.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from pydantic import BaseModel

from nodestep import (
    END,
    START,
    BaseState,
    CircuitBreaker,
    CredentialsProvider,
    FilesystemStateStore,
    Graph,
    NodeContext,
    RetryPolicy,
    node,
)


class Support(BaseState):
    message: str = ""
    order_id: str = ""
    order_status: str = ""
    reply: str = ""


class ChatMemory(BaseModel):
    customer: str = ""
    turns: int = 0


class OrdersApi:
    """A stand-in for an HTTP API that refuses the first two connections."""

    def __init__(self) -> None:
        self.connections = 0

    def status(self, order_id: str, token: str) -> str:
        self.connections += 1
        if self.connections <= 2:
            raise ConnectionError("orders API: connection reset")
        if not token.startswith("tok-"):
            raise PermissionError("orders API: bad token")
        return "shipped"


api = OrdersApi()


@node(
    retry=RetryPolicy(attempts=4, backoff=0.01, retry_on=ConnectionError),
    breaker=CircuitBreaker(failures=10, window=60, cooldown=30),
    roles=["orders"],
)
def lookup_order(state: Support, ctx: NodeContext) -> dict:
    if not state.order_id:
        return {}
    token = ctx.credentials("orders").secret()
    return {"order_status": api.status(state.order_id, token)}


@node(private_state=ChatMemory)
def assistant(state: Support, *, memory: ChatMemory) -> dict:
    memory.turns += 1
    if state.message.startswith("I am "):
        memory.customer = state.message.removeprefix("I am ").split(",")[0]
    name = memory.customer or "there"
    if state.order_status:
        return {"reply": f"Hi {name}, order {state.order_id} is {state.order_status}."}
    return {"reply": f"Hi {name}, how can I help? (turn {memory.turns})"}


def support_graph(path: Path) -> Graph[Support]:
    store = FilesystemStateStore(path)
    return Graph(Support, state_store=store).flow(
        START >> lookup_order, lookup_order >> assistant, assistant >> END
    )


def main(directory: Path) -> None:
    path = directory / "support.jsonl"
    credentials = CredentialsProvider({"orders": "tok-7f3a9c"})

    first = support_graph(path).invoke(
        {"message": "I am Dana, hello"}, thread_id="ticket-9", credentials=credentials
    )
    print(first.state.reply)

    # A new graph on the same file, as a restarted process would build.
    graph = support_graph(path)
    second = graph.invoke(
        {"message": "Where is my order?", "order_id": "A-17"},
        thread_id="ticket-9",
        credentials=credentials,
    )
    print(second.state.reply)

    events = graph.history_sync("ticket-9").events
    for event in events:
        if event.type == "task_retried":
            print(f"attempt {event.data['attempt']} failed: {event.data['message']}")
    print("memory:", graph.node_state_sync("ticket-9", assistant))
    print("token stored:", b"tok-7f3a9c" in path.read_bytes())


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(Path(tmp))
