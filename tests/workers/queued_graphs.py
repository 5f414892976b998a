"""Graphs the worker tests queue: imported by path in the worker processes.

The store comes from the environment, as a deployed graph module would take it:
``NODESTEP_TEST_STORE`` is the store's URL (``open_store``): the test's own schema of the
PostgreSQL database (``NODESTEP_TEST_SCHEMA``), or a history file.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated

import anyio
from pydantic import Field

from nodestep import END, START, BaseState, Command, Graph, add, interrupt, node, open_store
from nodestep.store import StateStore


class Ledger(BaseState):
    items: Annotated[list[str], add] = Field(default_factory=list)
    checked: Annotated[list[str], add] = Field(default_factory=list)
    count: int = 0


def _marks() -> Path:
    return Path(os.environ["NODESTEP_TEST_MARKS"])


@node(goto=["audit", "slow"])
def count(state: Ledger) -> Command:
    return Command(update={"count": len(state.items)}, goto=["audit", "slow"])


@node
def audit(state: Ledger) -> dict:
    # a task that finishes quickly in the superstep a kill interrupts: it must not run again
    with (_marks() / "audit.log").open("a") as f:
        f.write(f"{state.items[-1]}\n")
    return {"checked": [state.items[-1]]}


@node
def slow(state: Ledger) -> dict:
    last = state.items[-1]
    if last.startswith("stall") and not (_marks() / f"{last}.released").exists():
        (_marks() / f"{last}.started").write_text(str(os.getpid()))
        time.sleep(60)  # the test kills this worker here; 60 s bounds a kill that never comes
    return {}


def _store() -> StateStore:
    url = os.environ["NODESTEP_TEST_STORE"]
    if url.startswith("postgresql://"):
        return open_store(url, schema=os.environ["NODESTEP_TEST_SCHEMA"], max_size=4)
    return open_store(url)


STORE = _store()  # both graphs share it, as one deployed module would

ledger = Graph(Ledger, name="ledger", state_store=STORE, lease_ttl=2.0).flow(
    START >> count, audit >> END, slow >> END
)


class Approval(BaseState):
    request: str = ""
    answer: str = ""


@node
def ask(state: Approval) -> dict:
    return {"answer": interrupt(f"approve {state.request}?", id="approve")}


approvals = Graph(Approval, name="approvals", state_store=STORE, lease_ttl=2.0).flow(
    START >> ask, ask >> END
)


class Wait(BaseState):
    label: str = ""
    done: bool = False


@node
async def hold(state: Wait) -> dict:
    (_marks() / f"{state.label}.started").write_text(str(os.getpid()))
    await anyio.sleep(60)  # the test cancels the run here; 60 s bounds a cancel that never comes
    return {"done": True}


waiting = Graph(Wait, name="waiting", state_store=STORE, lease_ttl=2.0).flow(
    START >> hold, hold >> END
)


class Chat(BaseState):
    answers: Annotated[list[str], add] = Field(default_factory=list)


@node(goto=["turn", END])
def turn(state: Chat) -> Command:
    # the same interrupt id every turn: an old answer would fit the next interrupt
    answer = interrupt(f"turn {len(state.answers) + 1}?", id="turn")
    more = len(state.answers) + 1 < 3
    return Command(update={"answers": [answer]}, goto="turn" if more else END)


chat = Graph(Chat, name="chat", state_store=STORE, lease_ttl=2.0).flow(START >> turn)


class Flaky(BaseState):
    done: int = 0


@node
def call(state: Flaky) -> dict:
    if (_marks() / "down").exists():
        raise ConnectionError("the service is down")
    return {"done": state.done + 1}


flaky = Graph(Flaky, name="flaky", state_store=STORE, lease_ttl=2.0).flow(
    START >> call, call >> END
)
