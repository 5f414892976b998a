"""A ReAct agent with two tools and an approval, resumed from a second process.

Run it with ``python examples/react_agent.py``.

A customer writes to a shop's support agent. The agent looks the order up with one tool,
then calls the other, ``refund``, which is made with ``@tool(approve=True)``: the run
pauses before the refund is paid, and the first process is done with the thread. It then
starts a second process (this script, with ``--resume PATH``), as a back office would days
later. That process opens the same history file, approves the refund with ``Resume``, and
streams the rest of the run, token by token.

The model is a ``ScriptedModel``, so the output is always the same. To run the same agent
on a real model, set two environment variables (and ``OPENAI_API_KEY`` if the server
wants a key; ``pip install 'nodestep[openai]'`` first)::

    OPENAI_BASE_URL=http://127.0.0.1:11434/v1 NODESTEP_MODEL=llama3.1 python examples/react_agent.py
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from nodestep import (
    FilesystemStateStore,
    Graph,
    MessagesState,
    Resume,
    ScriptedModel,
    ScriptedReply,
    create_react_agent,
    tool,
)
from nodestep.agents import OpenAIChatModel

THREAD = "ticket-5531"
ORDERS = {"A-17": {"item": "kettle", "price_eur": 49, "status": "delivered, reported broken"}}


@tool
def lookup_order(order: str) -> dict:
    """Look up an order by its number.

    Args:
        order: The order number, such as A-17.
    """
    return ORDERS.get(order, {"error": f"no order {order}"})


@tool(approve=True)
def refund(order: str, amount_eur: int) -> str:
    """Refund an order; a person approves each refund first.

    Args:
        order: The order number.
        amount_eur: The amount to refund, in euros.
    """
    return f"refunded {amount_eur} EUR on order {order}"


def chat_model() -> Any:
    """The real model when the two variables are set, else the scripted one."""
    if os.environ.get("OPENAI_BASE_URL") and os.environ.get("NODESTEP_MODEL"):
        return OpenAIChatModel(os.environ["NODESTEP_MODEL"], temperature=0)
    return ScriptedModel(
        [
            ScriptedReply(
                "Let me find your order.", tool_calls=[("lookup_order", {"order": "A-17"})]
            ),
            ScriptedReply(
                "The kettle was reported broken, so I will refund it.",
                tool_calls=[("refund", {"order": "A-17", "amount_eur": 49})],
                expect="reported broken",
            ),
            ScriptedReply("Your refund of 49 EUR is on its way.", expect="refunded 49 EUR"),
        ]
    )


def build_agent(path: Path) -> Graph[MessagesState]:
    """Build the agent on the history file; both processes build the same one."""
    return create_react_agent(
        chat_model(),
        [lookup_order, refund],
        system="You are the support agent of a kitchen shop. Be brief.",
        state_store=FilesystemStateStore(path),
    )


def first_process() -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "support.jsonl"
        agent = build_agent(path)
        result = agent.invoke(
            {"messages": "My kettle, order A-17, arrived broken."}, thread_id=THREAD
        )
        for message in result.state.messages:
            print(f"[process 1] {message.role}: {message.content or message.tool_calls}")
        print(f"[process 1] status: {result.status}")
        if result.status != "interrupted":  # a real model may answer without a refund
            return
        for call in result.interrupt.payload["tool_calls"]:
            print(f"[process 1] waiting for approval: {call['name']}({call['args']})")
        print("[process 1] done with the thread; starting process 2")

        sys.stdout.flush()  # before the child writes to the same stdout
        subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--resume", str(path)], check=True
        )


def second_process(path: Path) -> None:
    agent = build_agent(path)
    snapshot = asyncio.run(agent.get_state(THREAD))
    waiting = snapshot.interrupts["tools:approve"].payload["tool_calls"]
    print(f"[process 2] thread {THREAD} is {snapshot.status}; approving {len(waiting)} call(s)")

    answer = Resume({call["id"]: "approve" for call in waiting})
    print("[process 2] tokens:", end="")
    for event in agent.stream(None, thread_id=THREAD, resume=answer, stream_mode=["messages"]):
        if event.mode == "messages":
            print(f" {event.data.content.strip()!r}", end="")
        elif event.mode == "final":
            print()
            for message in event.data.state.messages[-3:]:
                print(f"[process 2] {message.role}: {message.content}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--resume":
        second_process(Path(sys.argv[2]))
    else:
        first_process()
