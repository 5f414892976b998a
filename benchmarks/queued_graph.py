"""The graph the worker benchmark queues: two supersteps, its store from the environment.

``NODESTEP_BENCH_STORE`` is a PostgreSQL URL (with ``NODESTEP_BENCH_SCHEMA``, the run's own
schema) or a history file's path.
"""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import Field

from nodestep import END, START, BaseState, Graph, StateStore, add, node, open_store


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
