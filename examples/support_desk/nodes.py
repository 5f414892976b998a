"""State, context and node functions that the support desk manifests name by import path."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from nodestep import BaseState, add


class Ticket(BaseState):
    scenario: str = ""
    status: str = ""
    failed: bool = False
    retry_count: int = 0
    priority: str = "normal"
    amount: float = 0.0
    urgent: bool = False
    customer_complaint: bool = False
    log: Annotated[list[str], add] = Field(default_factory=list)


class User(BaseModel):
    tier: str = "free"


class Caller(BaseModel):
    """The run's context: who is calling. Conditions read it; it is never stored."""

    user: User = User()


class UnauthorizedError(Exception):
    """The backend refused the ticket's credentials."""


def process(t: Ticket) -> dict[str, object]:
    if t.scenario == "flaky" and t.retry_count < 2:
        return {"failed": True, "log": [f"attempt {t.retry_count + 1} failed"]}
    if t.scenario in ("ok", "flaky"):
        return {"failed": False, "status": "complete", "log": ["processed"]}
    if t.scenario == "payment":
        return {"status": "pending", "log": ["payment received"]}
    if t.scenario == "locked":
        raise UnauthorizedError("token expired for account 42")
    if t.scenario == "slow":
        raise TimeoutError("billing API did not answer in 5s")
    if t.scenario == "vip":
        return {"status": "open", "urgent": True, "log": ["escalation asked"]}
    return {"status": "open", "log": ["queued"]}


def retry(t: Ticket) -> dict[str, object]:
    return {"retry_count": t.retry_count + 1, "log": ["retrying"]}


def validate_transaction(t: Ticket) -> bool:
    """A business rule the manifest calls by its registered name."""
    return 0 < t.amount <= 10_000
