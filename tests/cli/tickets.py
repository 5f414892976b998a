"""The state and functions the command line tests' YAML manifests name (``tickets:...``)."""

from __future__ import annotations

from nodestep import BaseState


class Ticket(BaseState):
    status: str = ""
    retry_count: int = 0


def work(ticket: Ticket) -> dict[str, str]:
    return {"status": "failed" if ticket.retry_count < 2 else "complete"}


def retry(ticket: Ticket) -> dict[str, int]:
    return {"retry_count": ticket.retry_count + 1}


not_a_graph = 42


def make_graph() -> None:
    """A function: a target that names it is told to call it."""
