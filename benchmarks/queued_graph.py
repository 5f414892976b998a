"""The graph the worker benchmark queues: two supersteps, its store from the environment."""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import Field

from nodestep import END, START, BaseState, FilesystemStateStore, Graph, add, node


class Tally(BaseState):
    items: Annotated[list[str], add] = Field(default_factory=list)
    count: int = 0


@node
def take(state: Tally) -> dict:
    return {"count": len(state.items)}


@node
def check(state: Tally) -> dict:
    return {}


def _store() -> FilesystemStateStore:
    return FilesystemStateStore(os.environ["NODESTEP_BENCH_STORE"])


tally = Graph(Tally, name="tally", state_store=_store()).flow(
    START >> take, take >> check, check >> END
)
