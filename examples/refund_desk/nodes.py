"""State, services and node functions that the refund agent's manifest names by import path.

The two services stand in for real APIs. Each process starts them afresh, as a real
process would find them: the orders API drops the first call, and the payments API is
down until the script says it is back.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from nodestep import BaseState, NodeContext, add


class Refund(BaseState):
    customer: str = ""
    message: str = ""
    order_id: str = ""
    amount: float = 0.0
    status: str = ""
    reply: str = ""
    log: Annotated[list[str], add] = Field(default_factory=list)


class CustomerNotes(BaseModel):
    """What the greeter remembers of a customer: private to it, kept with the thread."""

    name: str = ""
    requests: list[str] = []


class OrdersAPI:
    """An orders service whose first ``drops`` calls fail, as after a restart."""

    def __init__(self, drops: int) -> None:
        self.drops = drops
        self.calls = 0

    def amount(self, order_id: str) -> float:
        self.calls += 1
        if self.calls <= self.drops:
            raise ConnectionError(f"orders API reset the connection (call {self.calls})")
        return {"A-1001": 49.0, "A-1002": 15.5}.get(order_id, 0.0)


class PaymentsAPI:
    """A payments service that is down until ``up`` is set."""

    def __init__(self) -> None:
        self.up = False
        self.calls = 0

    def refund(self, order_id: str, amount: float, token: str) -> str:
        self.calls += 1
        if not self.up:
            raise ConnectionError("payments API unavailable (503)")
        return f"refund of {amount:.2f} for {order_id} sent (token of {len(token)} chars)"


orders = OrdersAPI(drops=2)
payments = PaymentsAPI()


def greet(state: Refund, *, notes: CustomerNotes) -> dict[str, object]:
    """Remember the customer and what they asked; greet a returning one by name."""
    returning = bool(notes.requests)
    notes.name = notes.name or state.customer
    notes.requests.append(state.message)
    hello = f"Welcome back, {notes.name}" if returning else f"Hello, {notes.name}"
    return {"log": [f"{hello} (request {len(notes.requests)})"]}


def lookup_order(state: Refund) -> dict[str, object]:
    """Find the order's amount; the orders API may drop the call (the manifest retries)."""
    amount = orders.amount(state.order_id)
    return {"amount": amount, "log": [f"order {state.order_id}: {amount:.2f}"]}


def refund_payment(state: Refund, ctx: NodeContext) -> dict[str, object]:
    """Refund through the payments API, with the credentials of the 'payments' role."""
    token = ctx.credentials("payments").secret()
    done = payments.refund(state.order_id, state.amount, token)
    return {"status": "refunded", "reply": done, "log": ["refunded"]}
