"""Graphs the sandbox tests serve: a plain one, a chat that streams tokens, an approval."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
from pydantic import Field

from nodestep import (
    END,
    START,
    Agent,
    BaseState,
    Graph,
    MessagesState,
    NodeContext,
    ScriptedModel,
    ScriptedReply,
    create_react_agent,
    interrupt,
    model_node,
    node,
    tool,
    when,
)
from nodestep.agents import MessageChunk


class Order(BaseState):
    items: list[str] = Field(default_factory=list)
    note: str = ""
    total: int = 0


@node
def price(state: Order, ctx: NodeContext) -> dict[str, Any]:
    ctx.emit({"priced": len(state.items)})
    return {"total": 3 * len(state.items)}


@node
def receipt(state: Order) -> dict[str, Any]:
    return {"note": f"{state.note} (total {state.total})"}


pricing = Graph(Order, name="pricing").flow(START >> price, price >> receipt, receipt >> END)

chat_model = ScriptedModel(["Tea grows on Camellia sinensis."] * 50)
agent = model_node(chat_model)
chat = Graph(MessagesState, name="chat").flow(START >> agent, agent >> END)


class Refund(BaseState):
    amount: int = 0
    status: str = "requested"


@node
def approve(state: Refund) -> dict[str, Any]:
    answer = interrupt({"question": f"Pay out {state.amount}?"}, id="approval")
    return {"status": "approved" if answer == "yes" else "refused"}


refund = Graph(Refund, name="refund").flow(START >> approve, approve >> END)


class Count(BaseState):
    count: int = 0
    limit: int = 0


@node
def tick(state: Count) -> dict[str, Any]:
    return {"count": state.count + 1}


counter = Graph(Count, name="counter", max_steps=100_000).flow(
    START >> tick, tick >> when("count < limit", tick, END)
)


@tool(approve=True)
def pay_back(order: str, amount: int) -> str:
    """Pay an order's money back."""
    return f"paid back {amount} EUR on {order}"


def _refund_replies() -> list[Any]:
    return [ScriptedReply(tool_calls=[("pay_back", {"order": "A-17", "amount": 120})]), "Done."]


refunds = create_react_agent(ScriptedModel(_refund_replies() * 20), [pay_back], name="refunds")


def get_order(number: int) -> str:
    """Find an order by its number."""
    return f"order {number}: shipped on Monday"


def _support_replies() -> list[Any]:
    return [
        ScriptedReply(tool_calls=[("get_order", {"number": 1042})]),
        "Your order shipped on Monday.",
        "You're welcome!",
    ]


class PacedModel(ScriptedModel):
    """A scripted model whose replies stream a word every 50 ms, as a real model's come."""

    async def stream(
        self,
        messages: Sequence[Any],
        tools: Sequence[dict[str, Any]] = (),
        tool_choice: str | None = None,
    ) -> AsyncIterator[MessageChunk]:
        async for chunk in super().stream(messages, tools, tool_choice):
            await anyio.sleep(0.05)
            yield chunk


support = Agent(
    Path(__file__).with_name("specs"),
    start_node="chat",
    llm=PacedModel(_support_replies() * 10),
    functions={"shop.get_order": get_order},
    name="support",
)


# An agent whose model has nothing to say: its first step fails.
mute = Agent(
    Path(__file__).with_name("specs"),
    start_node="chat",
    llm=ScriptedModel([], name="mute"),
    functions={"shop.get_order": get_order},
    name="mute",
)


class Hold(BaseState):
    seconds: float = 0.0
    done: bool = False


@node
async def hold_on(state: Hold) -> dict[str, Any]:
    await anyio.sleep(state.seconds)
    return {"done": True}


hold = Graph(Hold, name="hold").flow(START >> hold_on, hold_on >> END)


class Stock(BaseState):
    item: str = ""


@node
def reserve(state: Stock) -> dict[str, Any]:
    raise ValueError(f"no stock of {state.item!r}")


broken = Graph(Stock, name="broken").flow(START >> reserve, reserve >> END)
