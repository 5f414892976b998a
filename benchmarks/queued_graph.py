"""The graph the worker benchmark queues: two supersteps, its store from the environment.

``NODESTEP_BENCH_STORE`` is a PostgreSQL URL (with ``NODESTEP_BENCH_SCHEMA``, the run's own
schema) or a history file's path.
"""

from __future__ import annotations

import hashlib
import os
from typing import Annotated

from pydantic import Field

from nodestep import END, START, BaseState, Graph, add, node, open_store
from nodestep.store import StateStore


class Tally(BaseState):
    items: Annotated[list[str], add] = Field(default_factory=list)
    count: int = 0


@node
def take(state: Tally) -> dict:
    return {"count": len(state.items)}


@node
def check(state: Tally) -> dict:
    return {}


def _store() -> StateStore:
    where = os.environ["NODESTEP_BENCH_STORE"]
    if where.startswith("postgresql://"):
        return open_store(where, schema=os.environ["NODESTEP_BENCH_SCHEMA"], max_size=4)
    return open_store(f"file://{where}")


tally = Graph(Tally, name="tally", state_store=_store()).flow(
    START >> take, take >> check, check >> END
)


@node
def crunch(state: Tally) -> dict:
    """About 10 ms of the worker's CPU (a fixed count of hashes, the same on every run)."""
    digest = state.items[-1].encode() if state.items else b""
    for _ in range(10_000):
        digest = hashlib.sha256(digest).digest()
    return {"count": len(state.items), "items": [digest.hex()[:8]]}


work = Graph(Tally, name="work", state_store=_store()).flow(
    START >> crunch, crunch >> check, check >> END
)
